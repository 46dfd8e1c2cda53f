package egress_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/retrybroker/retrybroker/internal/credential"
)

// headerCred is a broker-held credential that sets headers no default list
// knows of (a signature's, a custom API key's).
type headerCred struct{ headers []string }

func (c headerCred) Name() string          { return "c1" }
func (c headerCred) Kind() credential.Kind { return credential.KindHeader }
func (c headerCred) Headers() []string     { return c.headers }
func (c headerCred) Overwrite() bool       { return false }
func (c headerCred) Apply(context.Context, *http.Request, *credential.Call) (credential.Stamp, error) {
	return credential.Stamp{}, nil
}
func (c headerCred) Rejected(credential.Stamp) bool { return false }

// TestClientRedirectStripsBrokerCredentialHeaders: a hop to another origin
// carries none of the headers the request's broker-held credential set,
// whatever their names; a same-origin hop keeps them.
func TestClientRedirectStripsBrokerCredentialHeaders(t *testing.T) {
	hdr := http.Header{"X-Custom-Key": {"s3cr3t"}, "Signature": {"sig1=:abc:"}, "X-Trace": {"keep-me"}}
	ctx := credential.WithCredential(context.Background(), headerCred{headers: []string{"X-Custom-Key", "Signature"}})

	final := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return final.URL + "/final" })
	c := newTestClient(t, followConfig(), nil, nil)
	mustGet(t, ctx, c, start.URL, hdr)
	if got := start.Requests()[0].Header.Get("X-Custom-Key"); got != "s3cr3t" {
		t.Fatalf("first hop lacks the credential: %q", got)
	}
	reqs := final.Requests()
	if len(reqs) != 1 {
		t.Fatalf("final got %d requests", len(reqs))
	}
	for _, h := range []string{"X-Custom-Key", "Signature"} {
		if v := reqs[0].Header.Get(h); v != "" {
			t.Errorf("cross-origin hop carried %s: %q", h, v)
		}
	}
	if reqs[0].Header.Get("X-Trace") != "keep-me" {
		t.Error("a header of no credential was dropped")
	}

	same := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mustGet(t, ctx, c, same.URL+"/start", hdr)
	if r := same.Requests(); len(r) != 2 || r[1].Header.Get("X-Custom-Key") != "s3cr3t" {
		t.Fatalf("same-origin hop lost the credential (%d requests)", len(r))
	}
}
