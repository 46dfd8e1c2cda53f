package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

// TestTokenClients: a token endpoint's client is dialled through the
// destination guard with the credential's own allow_destinations only
// (none: loopback refused before any connection), and follows no
// redirect.
func TestTokenClients(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/token", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	tc := &tokenClients{}
	early, err := tc.client([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := early.Get(srv.URL + "/token"); err == nil || hits.Load() != 0 {
		t.Fatalf("a token request before the broker's clients exist: %v", err)
	}
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	tc.clients.Store(clients)

	def, err := tc.client(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = def.Get(srv.URL + "/token")
	var re *egress.RefusedError
	if !errors.As(err, &re) || hits.Load() != 0 {
		t.Fatalf("default rules: %v, %d requests reached loopback; want refused before connecting", err, hits.Load())
	}

	allowed, err := tc.client([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := allowed.Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits.Load() != 1 {
		t.Fatalf("status %d after %d requests; want the 302 itself, not followed", resp.StatusCode, hits.Load())
	}
	if again, _ := tc.client([]string{"127.0.0.1/32"}); again != allowed || again != early {
		t.Error("the same allow list built a second client")
	}
	if _, err := tc.client([]string{"not-a-cidr"}); err == nil {
		t.Error("an invalid allow list was accepted")
	}
}
