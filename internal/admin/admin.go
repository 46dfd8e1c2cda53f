package admin

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// Paths of the admin view.
const (
	// PagePath is the HTML page.
	PagePath = "/admin/"
	// GatesPath lists a tenant's live gates: GET
	// /admin/gates?tenant=T[&state=closed|breaker_open|learning][&page_size=N][&page_token=X].
	GatesPath = "/admin/gates"
	// GatePath shows one gate: GET /admin/gate?tenant=T&provider=P (a
	// named provider's gate) or ?tenant=T&host=H (a host's gate), with
	// &credential=FINGERPRINT for policies that gate by credential.
	GatePath = "/admin/gate"
	// CatalogPath shows a tenant's loaded provider catalog:
	// GET /admin/catalog?tenant=T.
	CatalogPath = "/admin/catalog"
	// TenantsPath lists the configured tenants' ids: GET /admin/tenants.
	TenantsPath = "/admin/tenants"
	// TasksPath lists a tenant's tasks (WithTasks):
	// GET /admin/tasks?tenant=T[&state=S][&page_size=N][&page_token=X];
	// 404 when task storage is off.
	TasksPath = "/admin/tasks"
	// PprofPath is net/http/pprof's index.
	PprofPath = "/debug/pprof/"
)

// Tenants is the configuration as the admin view reads it: which tenants
// exist, and each one's provider catalog. It is read on every request, so
// a reloaded configuration shows at once.
type Tenants interface {
	// TenantIDs returns the tenants' ids, in the configuration's order.
	TenantIDs() []string
	// Catalog returns the provider catalog tenant sees; ok is false for a
	// tenant the configuration does not have.
	Catalog(tenant string) (cat *providers.Catalog, ok bool)
}

// Option configures New.
type Option func(*options)

type options struct {
	token  Token
	tokens func() []Token
	now    func() time.Time
	tasks  func() tasks.Store
}

// WithToken makes every request, from any peer (loopback included), need
// "Authorization: Bearer TOKEN" whose SHA-256 is t's (401 otherwise);
// without a token (WithToken with the zero Token, and WithTokens giving
// none) only loopback peers are served (403 otherwise).
func WithToken(t Token) Option { return func(o *options) { o.token = t } }

// WithTokens adds tokens read on every request (the configuration's
// admin.token_sha256, which a reload may change): any of them, or
// WithToken's, opens the view as WithToken does.
func WithTokens(tokens func() []Token) Option { return func(o *options) { o.tokens = tokens } }

// authorized reports whether r may pass the guard, and the status to
// answer when not (401 or 403).
func (o *options) authorized(r *http.Request) (bool, int) {
	var dynamic []Token
	if o.tokens != nil {
		dynamic = o.tokens()
	}
	if !o.token.Set() && len(dynamic) == 0 {
		return LoopbackPeer(r.RemoteAddr), http.StatusForbidden
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false, http.StatusUnauthorized
	}
	tok = strings.TrimSpace(tok)
	match := o.token.matches(tok)
	for _, t := range dynamic {
		match = t.matches(tok) || match // every hash compared, in constant time each
	}
	return match, http.StatusUnauthorized
}

// WithClock sets the clock state is read at (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// handler serves the admin view.
type handler struct {
	st      store.Store
	tenants Tenants
	opts    options
	tokens  cipher.AEAD // seals page tokens: they carry gate positions
	page    pageAssets
	mux     *http.ServeMux
	// reads holds a slot per store read in progress (MaxStoreReads).
	reads chan struct{}
}

// Bounds of the work the admin view asks of the store.
const (
	// MaxStoreReads is how many admin requests may read the store at once
	// (a listing reads a tenant's whole gate index); one more answers 503
	// with Retry-After: 1.
	MaxStoreReads = 4
	// StoreTimeout bounds each admin request's store reads; past it the
	// answer is 503.
	StoreTimeout = 5 * time.Second
)

// New returns the admin view's handler over st and tenants. Every path is
// behind the guard (see WithToken): the peer is checked (or the token)
// first, then the method (GET and HEAD only: 405 otherwise, with Allow),
// before anything else is read.
func New(st store.Store, tenants Tenants, opts ...Option) (http.Handler, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	h := &handler{st: st, tenants: tenants, opts: o, tokens: aead, page: newPageAssets(), mux: http.NewServeMux(), reads: make(chan struct{}, MaxStoreReads)}
	h.mux.HandleFunc(PagePath, h.servePage)
	h.mux.HandleFunc(GatesPath, h.serveGates)
	h.mux.HandleFunc(GatePath, h.serveGate)
	h.mux.HandleFunc(CatalogPath, h.serveCatalog)
	h.mux.HandleFunc(TenantsPath, h.serveTenants)
	h.mux.HandleFunc(TasksPath, h.serveTasks)
	h.mux.HandleFunc(PprofPath, pprof.Index)
	h.mux.HandleFunc(PprofPath+"cmdline", pprof.Cmdline)
	h.mux.HandleFunc(PprofPath+"profile", pprof.Profile)
	h.mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
	h.mux.HandleFunc(PprofPath+"trace", pprof.Trace)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such admin path: see "+PagePath)
	})
	return h, nil
}

// ServeHTTP implements http.Handler: the guard, then the paths.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ok, code := h.opts.authorized(r); !ok {
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="retrybroker admin"`)
			writeError(w, code, "the admin view needs the admin token: Authorization: Bearer TOKEN")
			return
		}
		writeError(w, code, "the admin view answers loopback peers only; set an admin token to open it to others")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "the admin view is read-only: GET or HEAD")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// storeRead runs read with a slot of h.reads and a context bounded by
// StoreTimeout, answering 503 when every slot is taken.
func (h *handler) storeRead(w http.ResponseWriter, r *http.Request, read func(ctx context.Context) error) {
	select {
	case h.reads <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the admin view is busy with other reads of the store; try again")
		return
	}
	defer func() { <-h.reads }()
	ctx, cancel := context.WithTimeout(r.Context(), StoreTimeout)
	defer cancel()
	if err := read(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, "the store did not answer")
	}
}

// LoopbackPeer reports whether remoteAddr (host:port, as net/http sets it)
// is a loopback address (IPv4-mapped forms included). Forwarding headers
// are not read.
func LoopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// writeJSON answers v as JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"error": msg} with status code.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}
