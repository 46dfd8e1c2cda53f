package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// AdminPrefix starts every admin path on the metrics listener. Unlike
// /metrics and /health/shared-state, which may be scraped from anywhere,
// what is under it answers only GET and HEAD (anything else is 405) and
// only a loopback peer (anyone else is 403), unless an admin token is set
// (--admin-token-file): then every peer, loopback included, must send
// "Authorization: Bearer TOKEN" (401 otherwise).
const AdminPrefix = "/admin/"

// AdminGatePath is the admin view of one cooldown gate, on the metrics
// listener: GET /admin/gate?tenant=T&provider=P (a named provider's gate)
// or ?tenant=T&host=H (a host's gate, for the retry-after reader), with
// &credential=FINGERPRINT for policies that gate by credential. It answers
// JSON: the gate's state, its announced quota, its learned quota and
// epoch, and whether a probe is out. It shows state, never credentials.
const AdminGatePath = "/admin/gate"

// gateView is the JSON of the admin gate view.
type gateView struct {
	Tenant           string     `json:"tenant"`
	Scope            string     `json:"scope"`
	ClosedUntil      *time.Time `json:"closed_until,omitempty"`
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
	InFlight         int64      `json:"in_flight"`
	Quota            *quotaView `json:"announced_quota,omitempty"`
	Learning         *learnView `json:"learning,omitempty"`
	ProbeInFlight    bool       `json:"probe_in_flight"`
}

type quotaView struct {
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

type learnView struct {
	Epoch        int64  `json:"epoch"`
	Admitted     int64  `json:"admitted"`
	NotAccepted  int64  `json:"not_accepted"`
	LearnedQuota *int64 `json:"learned_quota,omitempty"`
}

// adminGateHandler serves AdminGatePath from st (stores that cannot
// inspect answer 501).
func adminGateHandler(st store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, ok := st.(store.Inspector)
		if !ok {
			http.Error(w, "this store cannot show gates", http.StatusNotImplemented)
			return
		}
		q := r.URL.Query()
		tenant, provider, host := q.Get("tenant"), q.Get("provider"), q.Get("host")
		if tenant == "" || (provider == "") == (host == "") {
			http.Error(w, "want tenant and one of provider or host", http.StatusBadRequest)
			return
		}
		key := store.GateKey{Tenant: tenant, Scope: engine.GateScope(provider, host), Credential: q.Get("credential")}
		info, err := in.InspectGate(r.Context(), key, time.Now())
		if err != nil {
			http.Error(w, "the store did not answer", http.StatusServiceUnavailable)
			return
		}
		v := gateView{Tenant: tenant, Scope: key.Scope, InFlight: info.InFlight, ProbeInFlight: info.ProbeInFlight}
		if t := info.Status.ClosedUntil; !t.IsZero() {
			v.ClosedUntil = &t
		}
		if t := info.Status.BreakerOpenUntil; !t.IsZero() {
			v.BreakerOpenUntil = &t
		}
		if info.HasQuota {
			v.Quota = &quotaView{Remaining: info.Remaining, Reset: info.Reset}
		}
		if info.Learning {
			v.Learning = &learnView{Epoch: info.Epoch, Admitted: info.Admitted, NotAccepted: info.NotAccepted}
			if info.Learned {
				l := info.LearnedQuota
				v.Learning.LearnedQuota = &l
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// maxTokenFile bounds what --admin-token-file may hold.
const maxTokenFile = 4096

// adminToken is the SHA-256 of the admin token; the zero value means none
// is set (admin is then loopback only).
type adminToken struct {
	hash [32]byte
	set  bool
}

// loadAdminToken reads --admin-token-file: the SHA-256 of the token, as 64
// hex digits (printf %s "$TOKEN" | sha256sum), like API keys in the
// configuration; the broker never holds the token itself. An empty path
// means no token. The file is read once, at start.
func loadAdminToken(path string) (adminToken, error) {
	if path == "" {
		return adminToken{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return adminToken{}, fmt.Errorf("--admin-token-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return adminToken{}, fmt.Errorf("--admin-token-file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	v = strings.TrimSpace(strings.TrimSuffix(v, "-")) // what sha256sum prints after the hash
	var t adminToken
	if len(b) > maxTokenFile || len(v) != 64 {
		return t, errors.New("--admin-token-file: want the SHA-256 of the token as 64 hex digits (printf %s \"$TOKEN\" | sha256sum), never the token itself")
	}
	if _, err := hex.Decode(t.hash[:], []byte(v)); err != nil {
		return t, errors.New("--admin-token-file: want the SHA-256 of the token as 64 hex digits (printf %s \"$TOKEN\" | sha256sum), never the token itself")
	}
	t.set = true
	return t, nil
}

// adminGuard serves next only to a request that may see the admin view:
// GET or HEAD (405 otherwise, with Allow), and, with a token set, a bearer
// token whose SHA-256 matches it (compared in constant time; 401
// otherwise), or without one a loopback peer (403 otherwise). The peer is
// the connection's remote address; forwarding headers are not read.
func adminGuard(next http.Handler, tok adminToken) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok.set {
			h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(h)))
			if !ok || subtle.ConstantTimeCompare(sum[:], tok.hash[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="retrybroker admin"`)
				http.Error(w, "the admin view needs the admin token: Authorization: Bearer TOKEN", http.StatusUnauthorized)
				return
			}
		} else if !loopbackPeer(r.RemoteAddr) {
			http.Error(w, "the admin view answers loopback peers only; set --admin-token-file to open it to others", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the admin view is read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackPeer reports whether remoteAddr (host:port, as net/http sets
// it) is a loopback address (IPv4-mapped forms included).
func loopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// adminHandler serves everything under AdminPrefix behind adminGuard.
func adminHandler(st store.Store, tok adminToken) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(AdminGatePath, adminGateHandler(st))
	return adminGuard(mux, tok)
}

// warnOpenMetrics logs, at start, that the metrics listener at addr is
// reachable from other hosts (it is not on loopback): /metrics and
// /health/shared-state answer anyone, and /admin/ needs the token (or
// answers loopback peers only, which a non-loopback listener makes
// reachable only from the host itself).
func warnOpenMetrics(logger *slog.Logger, addr net.Addr, tok adminToken) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err == nil && ap.Addr().Unmap().IsLoopback() {
		return
	}
	if tok.set {
		logger.Warn("metrics listener is not on loopback: /metrics and /health/shared-state answer any peer; /admin/ needs the admin token",
			"addr", addr.String())
		return
	}
	logger.Warn("metrics listener is not on loopback: /metrics and /health/shared-state answer any peer; /admin/ answers loopback peers only (set --admin-token-file to open it to others)",
		"addr", addr.String())
}
