package egress

import "net/http"

// RedirectPolicy returns the http.Client CheckRedirect function that
// NewClient uses for cfg: redirects are returned as responses unless
// cfg.FollowRedirects, and followed hops lose credentials once the origin
// changes. It lets several clients with different redirect settings share
// one Transport (and so its guarded connection pools).
func RedirectPolicy(cfg ClientConfig) func(*http.Request, []*http.Request) error {
	return redirectPolicy(cfg)
}
