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
// only), never following redirects. Credentials are built (and ask for
// their client) when the configuration loads, before the egress clients
// exist: each client's transport finds them when it first sends, and a
// request before that fails.
type tokenClients struct {
	clients atomic.Pointer[egress.Clients]
	mu      sync.Mutex
	byAllow map[string]*http.Client // one per allow list, keeping its rules' bound client
}

// client returns the token client for allow.
func (t *tokenClients) client(allow []string) (*http.Client, error) {
	key := strings.Join(allow, ",")
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byAllow[key]; ok {
		return c, nil
	}
	prefixes := make([]netip.Prefix, 0, len(allow))
	for _, s := range allow {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, p)
	}
	rules, err := egress.NewRules(egress.RulesConfig{AllowPrefixes: prefixes})
	if err != nil {
		return nil, err
	}
	c := &http.Client{
		Transport:     &tokenTransport{t: t, rules: rules},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if t.byAllow == nil {
		t.byAllow = map[string]*http.Client{}
	}
	t.byAllow[key] = c
	return c, nil
}

// tokenTransport sends through the guarded client of its rules.
type tokenTransport struct {
	t     *tokenClients
	rules *egress.Rules
}

func (tt *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := tt.t.clients.Load()
	if c == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("the broker's HTTP clients are not ready yet")
	}
	hc, err := c.For(tt.rules)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return hc.Transport.RoundTrip(req)
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
