package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/retrybroker/retrybroker/internal/admin"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tasks"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// AdminGatePath is the admin view of one gate, on the admin listener.
const AdminGatePath = admin.GatePath

// loadAdminToken reads --admin-token-file (see admin.LoadTokenFile).
func loadAdminToken(path string) (admin.Token, error) {
	t, err := admin.LoadTokenFile(path)
	if err != nil {
		return t, fmt.Errorf("--admin-token-file: %w", err)
	}
	return t, nil
}

// checkAdminListen refuses an admin listener that would answer others
// without a token: a non-loopback --admin-listen needs one (tok, from
// --admin-token-file, or configured of the configuration's
// admin.token_sha256), and a token file without an admin listener
// protects nothing.
func checkAdminListen(addr string, tok admin.Token, configured int) error {
	if addr == "" {
		if tok.Set() {
			return errors.New("--admin-token-file protects the admin listener: give --admin-listen too")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--admin-listen %q: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	loopback := host == "localhost" || err == nil && ip.Unmap().IsLoopback()
	if !loopback && !tok.Set() && configured == 0 {
		return fmt.Errorf("refusing --admin-listen %q without an admin token: off loopback, the admin view needs admin.token_sha256 in the configuration or --admin-token-file (the SHA-256 of the token)", addr)
	}
	return nil
}

// configTokens returns the admin tokens of the configuration in use
// (none without one).
func configTokens(ids identities) []admin.Token {
	if ids.holder == nil {
		return nil
	}
	hashes := ids.holder.Directory().AdminTokenHashes()
	out := make([]admin.Token, len(hashes))
	for i, h := range hashes {
		out[i] = admin.TokenFromHash(h)
	}
	return out
}

// adminTenants is the configuration as the admin view reads it: the
// holder's current directory, or the dev tenant alone.
type adminTenants struct {
	ids identities
}

func (a adminTenants) TenantIDs() []string {
	if a.ids.holder == nil {
		return []string{a.ids.dev.ID}
	}
	ts := a.ids.holder.Directory().Tenants()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func (a adminTenants) Catalog(id string) (*providers.Catalog, bool) {
	var t *tenant.Tenant
	if a.ids.holder == nil {
		if id != a.ids.dev.ID {
			return nil, false
		}
		t = a.ids.dev
	} else {
		var ok bool
		if t, ok = a.ids.holder.Directory().Tenant(id); !ok {
			return nil, false
		}
	}
	return t.ProviderCatalog(), true
}

// serveAdmin serves the admin view (internal/admin) on its own listener
// at addr, with the task storage ts (nil: tasks are off); the returned
// function stops it.
func serveAdmin(addr string, st store.Store, ids identities, tok admin.Token, ts tasks.Store, logger *slog.Logger) (func(), error) {
	h, err := admin.New(st, adminTenants{ids}, admin.WithToken(tok),
		admin.WithTokens(func() []admin.Token { return configTokens(ids) }),
		admin.WithTasks(func() tasks.Store { return ts }))
	if err != nil {
		return nil, fmt.Errorf("admin view: %w", err)
	}
	return serveHTTP("admin", addr, func(net.Addr) http.Handler { return h }, logger)
}

// warnOpenMetrics logs, at start, that the metrics listener at addr is
// reachable from other hosts (it is not on loopback): /metrics and
// /health/shared-state answer anyone.
func warnOpenMetrics(logger *slog.Logger, addr net.Addr) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err == nil && ap.Addr().Unmap().IsLoopback() {
		return
	}
	logger.Warn("metrics listener is not on loopback: /metrics and /health/shared-state answer any peer (the admin view is on --admin-listen)",
		"addr", addr.String())
}
