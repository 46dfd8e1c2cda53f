package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/metrics"
)

// CredentialsHealthPath serves, on the metrics listener, the broker-held
// credentials that could not be had on their last use (tenant, credential,
// cause, since), as JSON. It answers 200 whatever it lists: one tenant's
// broken credential is no reason to take the broker out of service.
const CredentialsHealthPath = "/health/credentials"

// tokenClients gives the credentials' token endpoints their HTTP clients:
// dialled through the destination guard of the broker's egress clients
// with the credential's own allow_destinations (nil: the default ranges
// only), never following redirects. The egress clients are created after
// the configuration is loaded; a token fetched before (none is) fails.
type tokenClients struct {
	clients atomic.Pointer[egress.Clients]
	mu      sync.Mutex
	rules   map[string]*egress.Rules // by allow list, so each keeps its bound client
}

// client returns the token client for allow.
func (t *tokenClients) client(allow []string) (*http.Client, error) {
	c := t.clients.Load()
	if c == nil {
		return nil, errors.New("the broker's HTTP clients are not ready yet")
	}
	key := strings.Join(allow, ",")
	t.mu.Lock()
	r, ok := t.rules[key]
	if !ok {
		prefixes := make([]netip.Prefix, 0, len(allow))
		for _, s := range allow {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				t.mu.Unlock()
				return nil, err
			}
			prefixes = append(prefixes, p)
		}
		var err error
		if r, err = egress.NewRules(egress.RulesConfig{AllowPrefixes: prefixes}); err != nil {
			t.mu.Unlock()
			return nil, err
		}
		if t.rules == nil {
			t.rules = map[string]*egress.Rules{}
		}
		t.rules[key] = r
	}
	t.mu.Unlock()
	return c.For(r)
}

// credentialDeps returns the load option that builds the tenants'
// credentials with the broker's token clients, metrics, clock and logger.
func credentialDeps(tc *tokenClients, mets *metrics.Metrics, logger *slog.Logger) config.LoadOption {
	return config.WithCredentialDeps(func(string) credential.Deps {
		return credential.Deps{TokenClient: tc.client, Observer: mets, Clock: credential.SystemClock, Log: logger}
	})
}

// withCredentialsHealth serves CredentialsHealthPath from mets and the rest
// from next.
func withCredentialsHealth(next http.Handler, mets *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc(CredentialsHealthPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := struct {
			Status      string                      `json:"status"`
			Unavailable []metrics.CredentialProblem `json:"unavailable"`
		}{Status: "ok", Unavailable: mets.CredentialProblems()}
		if len(body.Unavailable) > 0 {
			body.Status = "unavailable"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}
