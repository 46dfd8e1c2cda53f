package admin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Bounds of admin queries; anything over them is a 400.
const (
	// MaxQuery is the longest query string, in bytes.
	MaxQuery = 4096
	// MaxValue is the longest value of one parameter, in bytes (tenant
	// ids, hosts, provider names, page tokens).
	MaxValue = 1024
	// DefaultPageSize is the page size of /admin/gates without page_size.
	DefaultPageSize = 100
)

// States a listing may be filtered by (state=...).
const (
	StateClosed      = "closed"
	StateBreakerOpen = "breaker_open"
	StateLearning    = "learning"
)

// credNamePrefix starts the Credential of a gate kept per broker-held
// credential: "cred:NAME". Every other Credential is a fingerprint of a
// caller's credential, and never shown.
const credNamePrefix = "cred:"

// errQuery is a query the admin view refuses (400).
type errQuery struct{ msg string }

func (e *errQuery) Error() string { return e.msg }

func badQuery(format string, args ...any) error { return &errQuery{fmt.Sprintf(format, args...)} }

// parseQuery parses raw, refusing (with an *errQuery) a query longer than
// MaxQuery, one that does not parse, a parameter not in allowed, one given
// twice, and a value longer than MaxValue.
func parseQuery(raw string, allowed ...string) (map[string]string, error) {
	if len(raw) > MaxQuery {
		return nil, badQuery("the query string is longer than %d bytes", MaxQuery)
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badQuery("the query string does not parse")
	}
	out := make(map[string]string, len(vals))
	for k, vs := range vals {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return nil, badQuery("unknown parameter %q (want %s)", clip(k), strings.Join(allowed, ", "))
		}
		if len(vs) != 1 {
			return nil, badQuery("parameter %q given %d times", k, len(vs))
		}
		if len(vs[0]) > MaxValue {
			return nil, badQuery("parameter %q is longer than %d bytes", k, MaxValue)
		}
		out[k] = vs[0]
	}
	return out, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// tenantOf returns q's tenant, answering 400 (none given) or 404 (not in
// the configuration) and false when there is none to serve.
func (h *handler) tenantOf(w http.ResponseWriter, q map[string]string) (string, bool) {
	t, ok := q["tenant"]
	if !ok || t == "" {
		writeError(w, http.StatusBadRequest, "want tenant=ID")
		return "", false
	}
	if _, ok := h.tenants.Catalog(t); !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no tenant %q in the configuration", t))
		return "", false
	}
	return t, true
}

// GateJSON is one gate in the admin view's JSON. It shows state, never a
// credential or its fingerprint.
type GateJSON struct {
	Tenant string `json:"tenant"`
	// Scope is "provider:NAME" or "host:HOST[:PORT]".
	Scope string `json:"scope"`
	// Credential is the broker-held credential the gate is kept for, by
	// name; empty otherwise.
	Credential string `json:"credential,omitempty"`
	// PerCallerCredential reports a gate kept for one caller credential
	// (a policy with gate_by_credential); which one is never shown.
	PerCallerCredential bool `json:"per_caller_credential,omitempty"`
	// States are the gate's states: "closed", "breaker_open", "learning"
	// ("open" when none of these).
	States           []string      `json:"states"`
	ClosedUntil      *time.Time    `json:"closed_until,omitempty"`
	BreakerOpenUntil *time.Time    `json:"breaker_open_until,omitempty"`
	InFlight         int64         `json:"in_flight"`
	Quota            *QuotaJSON    `json:"announced_quota,omitempty"`
	Learning         *LearningJSON `json:"learning,omitempty"`
	ProbeInFlight    bool          `json:"probe_in_flight"`
}

// QuotaJSON is a gate's announced quota: Remaining calls until Reset.
type QuotaJSON struct {
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// LearningJSON is a gate's learned state: the epoch, its counts, and the
// learned quota L once learned.
type LearningJSON struct {
	Epoch        int64  `json:"epoch"`
	Admitted     int64  `json:"admitted"`
	NotAccepted  int64  `json:"not_accepted"`
	LearnedQuota *int64 `json:"learned_quota,omitempty"`
}

// gateJSON is the JSON of key's gate holding info.
func gateJSON(key store.GateKey, info store.GateInfo) GateJSON {
	v := GateJSON{Tenant: key.Tenant, Scope: key.Scope, InFlight: info.InFlight, ProbeInFlight: info.ProbeInFlight}
	if name, ok := strings.CutPrefix(key.Credential, credNamePrefix); ok {
		v.Credential = name
	} else if key.Credential != "" {
		v.PerCallerCredential = true
	}
	if t := info.Status.ClosedUntil; !t.IsZero() {
		v.ClosedUntil = &t
		v.States = append(v.States, StateClosed)
	}
	if t := info.Status.BreakerOpenUntil; !t.IsZero() {
		v.BreakerOpenUntil = &t
		v.States = append(v.States, StateBreakerOpen)
	}
	if info.HasQuota {
		v.Quota = &QuotaJSON{Remaining: info.Remaining, Reset: info.Reset}
	}
	if info.Learning {
		v.Learning = &LearningJSON{Epoch: info.Epoch, Admitted: info.Admitted, NotAccepted: info.NotAccepted}
		if info.Learned {
			l := info.LearnedQuota
			v.Learning.LearnedQuota = &l
		}
		v.States = append(v.States, StateLearning)
	}
	if len(v.States) == 0 {
		v.States = []string{"open"}
	}
	return v
}

// GatesJSON is a page of /admin/gates.
type GatesJSON struct {
	Tenant string     `json:"tenant"`
	State  string     `json:"state,omitempty"`
	Gates  []GateJSON `json:"gates"`
	// NextPageToken, when not empty, is the page_token of the next page.
	// Tokens are sealed by this broker process: another process, or
	// another query, refuses them.
	NextPageToken string `json:"next_page_token,omitempty"`
}

func (h *handler) serveGates(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "tenant", "state", "page_size", "page_token")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tenant, ok := h.tenantOf(w, q)
	if !ok {
		return
	}
	state := q["state"]
	var match func(store.GateInfo) bool
	switch state {
	case "":
	case StateClosed:
		match = func(i store.GateInfo) bool { return !i.Status.ClosedUntil.IsZero() }
	case StateBreakerOpen:
		match = func(i store.GateInfo) bool { return !i.Status.BreakerOpenUntil.IsZero() }
	case StateLearning:
		match = func(i store.GateInfo) bool { return i.Learning }
	default:
		writeError(w, http.StatusBadRequest, "state must be closed, breaker_open or learning")
		return
	}
	size := DefaultPageSize
	if s, ok := q["page_size"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxListGates {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("page_size must be a whole number from 1 to %d", store.MaxListGates))
			return
		}
		size = n
	}
	after := ""
	if t, ok := q["page_token"]; ok {
		if after, err = h.openToken(t, tenant, state); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	lister, ok := h.st.(store.GateLister)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this store cannot list gates")
		return
	}
	h.storeRead(w, r, func(ctx context.Context) error {
		page, err := lister.ListGates(ctx, store.ListGatesRequest{Tenant: tenant, After: after, Limit: size, Match: match, Now: h.opts.now()})
		if err != nil {
			return err
		}
		out := GatesJSON{Tenant: tenant, State: state, Gates: make([]GateJSON, 0, len(page.Gates))}
		for _, g := range page.Gates {
			out.Gates = append(out.Gates, gateJSON(g.Key, g.Info))
		}
		if page.Next != "" {
			out.NextPageToken = h.sealToken(page.Next, tenant, state)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// sealToken seals a store position into a page token for tenant's listing
// filtered by state: positions hold gate keys, credential fingerprints
// included, so they leave the broker only encrypted (AES-GCM, with a key
// made at start).
func (h *handler) sealToken(pos, tenant, state string) string {
	nonce := make([]byte, h.tokens.NonceSize(), h.tokens.NonceSize()+len(pos)+h.tokens.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "" // no token: the listing ends here rather than leak
	}
	return base64.RawURLEncoding.EncodeToString(h.tokens.Seal(nonce, nonce, []byte(pos), tokenAD(tenant, state)))
}

var errToken = errors.New("page_token is not one this broker issued for this query (tokens last as long as the broker process)")

// openToken returns the position sealed in token for tenant and state.
func (h *handler) openToken(token, tenant, state string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < h.tokens.NonceSize()+h.tokens.Overhead() {
		return "", errToken
	}
	ns := h.tokens.NonceSize()
	pos, err := h.tokens.Open(nil, b[:ns], b[ns:], tokenAD(tenant, state))
	if err != nil {
		return "", errToken
	}
	return string(pos), nil
}

func tokenAD(tenant, state string) []byte { return []byte(tenant + "\x00" + state) }

func (h *handler) serveGate(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "tenant", "provider", "host", "credential")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tenant, ok := h.tenantOf(w, q)
	if !ok {
		return
	}
	provider, host := q["provider"], q["host"]
	if (provider == "") == (host == "") {
		writeError(w, http.StatusBadRequest, "want one of provider or host")
		return
	}
	in, ok := h.st.(store.Inspector)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this store cannot show gates")
		return
	}
	key := store.GateKey{Tenant: tenant, Scope: engine.GateScope(provider, host), Credential: q["credential"]}
	h.storeRead(w, r, func(ctx context.Context) error {
		info, err := in.InspectGate(ctx, key, h.opts.now())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, gateJSON(key, info))
		return nil
	})
}

// CatalogJSON is a tenant's loaded provider catalog.
type CatalogJSON struct {
	Tenant    string         `json:"tenant"`
	Version   string         `json:"version"`
	Providers []ProviderJSON `json:"providers"`
}

// ProviderJSON is one catalog entry: its name, where it was defined (empty
// for the built-in catalog), its hosts, and its readers by kind.
type ProviderJSON struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Origin      string   `json:"origin,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
	Hints       []string `json:"hints,omitempty"`
	Quotas      []string `json:"quotas,omitempty"`
	ShouldRetry []string `json:"should_retry,omitempty"`
	Rules       []string `json:"rules,omitempty"`
}

func (h *handler) serveCatalog(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "tenant")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tenant, ok := h.tenantOf(w, q)
	if !ok {
		return
	}
	cat, _ := h.tenants.Catalog(tenant)
	out := CatalogJSON{Tenant: tenant, Version: cat.Version(), Providers: []ProviderJSON{}}
	for _, e := range cat.Entries() {
		sp := e.Spec()
		p := ProviderJSON{Name: e.Name(), Title: sp.Title, Origin: e.Origin(), Hosts: e.Hosts(), ShouldRetry: sp.ShouldRetry}
		for _, hs := range sp.Hints {
			p.Hints = append(p.Hints, hintName(hs.Header, hs.Body, hs.Format, len(hs.Longest)))
		}
		for _, qs := range sp.Quotas {
			name := qs.Remaining
			if name == "" {
				name = qs.RemainingPrefix + "*"
			}
			p.Quotas = append(p.Quotas, name)
		}
		for _, rs := range sp.Rules {
			p.Rules = append(p.Rules, rs.Name)
		}
		out.Providers = append(out.Providers, p)
	}
	writeJSON(w, http.StatusOK, out)
}

// hintName names one hint reader step: "header NAME (format)", "body PATH"
// or "longest of N".
func hintName(header, body, format string, longest int) string {
	var s string
	switch {
	case header != "":
		s = "header " + header
	case body != "":
		s = "body " + body
	default:
		return fmt.Sprintf("longest of %d", longest)
	}
	if format != "" {
		s += " (" + format + ")"
	}
	return s
}

// maxTenantsListed bounds /admin/tenants.
const maxTenantsListed = 10_000

// TenantsJSON lists the configured tenants.
type TenantsJSON struct {
	Tenants []string `json:"tenants"`
	// Truncated reports that only the first 10,000 are listed.
	Truncated bool `json:"truncated,omitempty"`
}

func (h *handler) serveTenants(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ids := h.tenants.TenantIDs()
	out := TenantsJSON{Tenants: ids}
	if len(ids) > maxTenantsListed {
		out.Tenants, out.Truncated = ids[:maxTenantsListed], true
	}
	if out.Tenants == nil {
		out.Tenants = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}
