package credential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The OAuth2 client-credentials kind's bounds and defaults. docs/policy.md
// lists them.
const (
	// DefaultTokenTimeout bounds one token request when Timeout is zero.
	DefaultTokenTimeout = 10 * time.Second
	// MaxTokenTimeout is the largest Timeout accepted.
	MaxTokenTimeout = 2 * time.Minute
	// DefaultExpiryMargin is how long before its expiry a token is
	// refreshed when ExpiryMargin is zero. The margin used is at most
	// half the token's lifetime (a 2 s token is refreshed 1 s before it
	// expires).
	DefaultExpiryMargin = 30 * time.Second
	// DefaultTokenLifetime is the lifetime assumed for a token whose
	// response has no expires_in (RFC 6749 5.1 makes it optional): it is
	// used for this long, and a 401 from the upstream renews it earlier.
	DefaultTokenLifetime = 5 * time.Minute
	// MaxTokenLifetime caps the lifetime a token is cached for, whatever
	// its expires_in says.
	MaxTokenLifetime = 24 * time.Hour
	// MaxAccessToken is the longest access token accepted, in bytes.
	MaxAccessToken = 16 << 10
	// TokenBackoffMin and TokenBackoffMax bound the backoff after a
	// failed token request: after n consecutive failures no request is
	// made for TokenBackoffMin·2^(n-1), at most TokenBackoffMax; in that
	// window every Apply that has no unexpired token fails at once with
	// the last failure's cause (callers share it instead of each asking
	// the endpoint). A success resets it.
	TokenBackoffMin = time.Second
	TokenBackoffMax = 30 * time.Second
	// tokenErrorExcerpt is how much of a token endpoint's error body or
	// description an error carries, in bytes.
	tokenErrorExcerpt = 160
	// maxFetchRounds bounds how often one Apply asks for a token because
	// the one it waited for had already expired when it got it.
	maxFetchRounds = 3
)

// Token fetch results, the Observer's result label.
const (
	fetchOK      = "ok"
	fetchRefused = "refused"
	fetchError   = "error"
	fetchInvalid = "invalid"
)

// oauth2Cred is an OAuth 2.0 client-credentials grant (RFC 6749 4.4): it
// sets Authorization: Bearer <token> on each attempt, with a token it
// fetches from the token endpoint and caches.
//
//   - Cache: one token per credential, used until refreshAt = expiry −
//     margin, margin = min(ExpiryMargin, lifetime/2). The lifetime is
//     expires_in (DefaultTokenLifetime when absent, at most
//     MaxTokenLifetime), counted from when the request was sent. A token
//     at or past its expiry is never used.
//   - Single flight: at most one token request at a time. Callers with no
//     unexpired token wait for it, each until its own ctx ends; callers
//     whose token is in its refresh margin start the request and keep
//     using that token meanwhile. The request runs detached from every
//     caller, bounded by Timeout, so one caller's cancellation never
//     fails the others; its token is cached for the next.
//   - Backoff: see TokenBackoffMin.
//   - Rejected invalidates the current token once.
//   - The client secret is read from its SecretRef on every request, so a
//     rotated file is used by the next one.
//   - Metrics: TokenFetch once per request; TokenExpiry after each
//     successful request and, from Apply, at most once a second.
//   - A cached Apply takes no lock: one atomic load of the token.
type oauth2Cred struct {
	name      string
	tenant    string
	overwrite bool
	cfg       *clientcredentials.Config // ClientSecret set per request, by the flight only
	secret    *secret
	client    *http.Client
	timeout   time.Duration
	margin    time.Duration
	clock     Clock
	obs       Observer
	deps      *Deps

	cur       atomic.Pointer[oauth2Token] // the cached token, nil when none
	nextGauge atomic.Int64                // unix nanoseconds of the next TokenExpiry from Apply

	mu        sync.Mutex
	gen       uint64       // the newest token's generation
	flight    *tokenFlight // the request in progress, nil when none
	failures  int          // consecutive failed requests
	failUntil time.Time    // no request before this
	failErr   *UnavailableError
}

// oauth2Token is one cached token. Immutable once published.
type oauth2Token struct {
	header    string // "Bearer " + access token
	gen       uint64
	expiry    time.Time
	refreshAt time.Time
}

// tokenFlight is one token request that callers wait for.
type tokenFlight struct {
	done chan struct{} // closed when tok or err is set
	tok  *oauth2Token
	err  *UnavailableError
}

func newOAuth2(spec Spec, deps Deps) (Credential, error) {
	o := spec.OAuth2
	where := "credentials." + spec.Name
	u, err := url.Parse(o.TokenURL)
	switch {
	case o.TokenURL == "":
		return nil, fmt.Errorf("%s.token_url: required", where)
	case err != nil:
		return nil, fmt.Errorf("%s.token_url: not a URL", where)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.User != nil, u.Fragment != "":
		return nil, fmt.Errorf("%s.token_url: must be an http or https URL with a host, without userinfo or fragment", where)
	}
	if o.ClientID == "" {
		return nil, fmt.Errorf("%s.client_id: required", where)
	}
	for _, s := range o.Scopes {
		if !validScope(s) {
			return nil, fmt.Errorf("%s.scopes: %q is not a scope token (RFC 6749 3.3)", where, s)
		}
	}
	params := url.Values{}
	for k, v := range o.EndpointParams {
		switch k {
		case "grant_type", "scope", "client_id", "client_secret":
			return nil, fmt.Errorf("%s.endpoint_params: %q is set by the broker", where, k)
		}
		params[k] = append([]string(nil), v...)
	}
	var style oauth2.AuthStyle
	switch o.AuthStyle {
	case "":
		style = oauth2.AuthStyleAutoDetect
	case "header":
		style = oauth2.AuthStyleInHeader
	case "params":
		style = oauth2.AuthStyleInParams
	default:
		return nil, fmt.Errorf("%s.auth_style: %q is not header or params", where, o.AuthStyle)
	}
	timeout := o.Timeout
	switch {
	case timeout < 0 || timeout > MaxTokenTimeout:
		return nil, fmt.Errorf("%s.timeout: %v is not between 0 and %v", where, timeout, MaxTokenTimeout)
	case timeout == 0:
		timeout = DefaultTokenTimeout
	}
	margin := o.ExpiryMargin
	switch {
	case margin < 0:
		return nil, fmt.Errorf("%s.expiry_margin: %v is negative", where, margin)
	case margin == 0:
		margin = DefaultExpiryMargin
	}
	if deps.TokenClient == nil {
		return nil, fmt.Errorf("credential %s: no HTTP client for the token endpoint", spec.Name)
	}
	client, err := deps.TokenClient(deps.TokenAllow)
	if err != nil {
		return nil, fmt.Errorf("%s.allow_destinations: %w", where, err)
	}
	sec, err := newSecret(o.ClientSecret, where+".client_secret", spec.Name, &deps)
	if err != nil {
		return nil, err
	}
	c := &oauth2Cred{
		name: spec.Name, tenant: deps.Tenant, overwrite: spec.Overwrite,
		cfg: &clientcredentials.Config{
			ClientID:       o.ClientID,
			TokenURL:       o.TokenURL,
			Scopes:         append([]string(nil), o.Scopes...),
			EndpointParams: params,
			AuthStyle:      style,
		},
		secret: sec, client: client, timeout: timeout, margin: margin,
		clock: deps.Clock, obs: deps.Observer,
	}
	c.deps = &deps
	return c, nil
}

// validScope reports whether s is a scope-token: 1*( %x21 / %x23-5B /
// %x5D-7E ).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x21 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

func (c *oauth2Cred) Name() string      { return c.name }
func (c *oauth2Cred) Kind() Kind        { return KindOAuth2 }
func (c *oauth2Cred) Headers() []string { return []string{"Authorization"} }
func (c *oauth2Cred) Overwrite() bool   { return c.overwrite }

// Apply sets Authorization: Bearer <token>, fetching a token when none is
// cached or the cached one is past its refresh time (see oauth2Cred).
func (c *oauth2Cred) Apply(ctx context.Context, req *http.Request, _ *Call) (Stamp, error) {
	now := c.clock.Now()
	tok := c.cur.Load()
	if tok == nil || !now.Before(tok.refreshAt) {
		var err error
		if tok, err = c.slow(ctx); err != nil {
			return Stamp{}, err
		}
		now = c.clock.Now()
	}
	if next := c.nextGauge.Load(); now.UnixNano() >= next && c.nextGauge.CompareAndSwap(next, now.Add(time.Second).UnixNano()) {
		c.obs.TokenExpiry(c.tenant, c.name, tok.expiry.Sub(now))
	}
	req.Header["Authorization"] = []string{tok.header}
	return Stamp{Generation: tok.gen}, nil
}

// slow returns a token that has not expired, starting or joining the
// token request as needed.
func (c *oauth2Cred) slow(ctx context.Context) (*oauth2Token, error) {
	for range maxFetchRounds {
		c.mu.Lock()
		now := c.clock.Now()
		tok := c.cur.Load()
		if tok != nil && now.Before(tok.refreshAt) {
			c.mu.Unlock()
			return tok, nil
		}
		valid := tok != nil && now.Before(tok.expiry)
		f := c.flight
		if f == nil {
			if now.Before(c.failUntil) {
				err := c.failErr
				c.mu.Unlock()
				if valid {
					return tok, nil
				}
				return nil, err
			}
			f = &tokenFlight{done: make(chan struct{})}
			c.flight = f
			go c.fetch(f)
		}
		c.mu.Unlock()
		if valid {
			// In the refresh margin: the request runs; this token is
			// still good until its expiry.
			return tok, nil
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, &UnavailableError{Credential: c.name, Cause: fmt.Errorf("waiting for a token: %w", ctx.Err())}
		}
		if f.err != nil {
			return nil, f.err
		}
		if c.clock.Now().Before(f.tok.expiry) {
			return f.tok, nil
		}
		// It expired before this caller could use it: ask again.
	}
	return nil, &UnavailableError{Credential: c.name, Cause: errors.New("each token fetched had expired before it could be used")}
}

// fetch makes one token request for f and publishes its outcome.
func (c *oauth2Cred) fetch(f *tokenFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := c.clock.Now()
	value, lifetime, result, cause := c.request(ctx)
	c.obs.TokenFetch(c.tenant, c.name, result)

	c.mu.Lock()
	now := c.clock.Now()
	var backoff time.Duration
	if cause == nil {
		c.gen++
		expiry := start.Add(lifetime)
		f.tok = &oauth2Token{
			header:    "Bearer " + value,
			gen:       c.gen,
			expiry:    expiry,
			refreshAt: expiry.Add(-min(c.margin, lifetime/2)),
		}
		c.cur.Store(f.tok)
		c.failures, c.failUntil, c.failErr = 0, time.Time{}, nil
	} else {
		f.err = &UnavailableError{Credential: c.name, Cause: cause}
		c.failures++
		backoff = tokenBackoff(c.failures)
		c.failUntil = now.Add(backoff)
		c.failErr = f.err
	}
	c.flight = nil
	close(f.done)
	c.mu.Unlock()

	if cause == nil {
		c.obs.TokenExpiry(c.tenant, c.name, f.tok.expiry.Sub(now))
		c.nextGauge.Store(now.Add(time.Second).UnixNano())
		return
	}
	c.deps.Log.Warn("token request failed",
		"tenant", c.tenant, "credential", c.name, "result", result, "error", cause, "backoff", backoff)
}

// tokenBackoff is the pause after n ≥ 1 consecutive failures.
func tokenBackoff(n int) time.Duration {
	if n > 6 {
		return TokenBackoffMax
	}
	return min(TokenBackoffMin<<(n-1), TokenBackoffMax)
}

// Rejected is told that the token stamp carried was refused (a 401). It
// invalidates that token only while it is the current one, so that the
// next Apply fetches a new one: N concurrent 401s for one token cause one
// invalidation and one token request. It reports whether a repeat with a
// new token is worth it: true when the refused token is no longer the
// current one (just invalidated here, by another call's 401, or already
// replaced by a newer token), so that every call whose attempt failed
// with the same old token repeats once (the engine allows one repeat per
// call) with the new one.
func (c *oauth2Cred) Rejected(stamp Stamp) bool {
	if stamp.Generation == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tok := c.cur.Load()
	switch {
	case tok == nil:
		return true // invalidated already: the repeat fetches a new token
	case tok.gen == stamp.Generation:
		c.cur.Store(nil)
		return true
	}
	return tok.gen > stamp.Generation
}

// request asks the token endpoint for a token, within ctx. It returns the
// access token and its lifetime, or the fetch result and a cause that
// names no secret.
func (c *oauth2Cred) request(ctx context.Context) (token string, lifetime time.Duration, result string, cause error) {
	secret, _ := c.secret.text()
	c.cfg.ClientSecret = secret
	defer func() { c.cfg.ClientSecret = "" }()
	rt := &recordingTransport{base: c.client.Transport}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	client := &http.Client{Transport: rt, CheckRedirect: c.client.CheckRedirect, Jar: c.client.Jar, Timeout: c.client.Timeout}
	t, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, client))
	if err != nil {
		result, cause = classifyTokenError(ctx, err, rt.failed(), secret, c.timeout)
		return "", 0, result, cause
	}
	token, lifetime, err = interpretToken(t)
	if err != nil {
		return "", 0, fetchInvalid, redactError(err, secret)
	}
	return token, lifetime, fetchOK, nil
}

// classifyTokenError turns a failed token request into a fetch result and
// a cause: the transport's or the timeout's ("error"), the endpoint's
// refusal ("refused": its status and an excerpt of its error), or a
// response that is no token ("invalid").
func classifyTokenError(ctx context.Context, err error, transport error, secret string, timeout time.Duration) (string, error) {
	var re *oauth2.RetrieveError
	switch {
	case ctx.Err() != nil:
		return fetchError, fmt.Errorf("the token endpoint did not answer within %v", timeout)
	case transport != nil:
		return fetchError, redactError(fmt.Errorf("token endpoint: %w", transport), secret)
	case errors.As(err, &re):
		status := "an error"
		if re.Response != nil {
			status = strconv.Itoa(re.Response.StatusCode)
			if re.Response.Status != "" {
				status = excerpt(re.Response.Status, secret)
			}
		}
		msg := "the token endpoint answered " + status
		switch {
		case re.ErrorCode != "":
			msg += ": " + excerpt(re.ErrorCode, secret)
			if re.ErrorDescription != "" {
				msg += ": " + excerpt(re.ErrorDescription, secret)
			}
		case len(re.Body) > 0:
			msg += ": " + excerpt(string(re.Body), secret)
		}
		return fetchRefused, errors.New(msg)
	}
	return fetchInvalid, redactError(fmt.Errorf("the token endpoint's response is no token: %w", err), secret)
}

// interpretToken checks a token response: a Bearer (or untyped) token
// that is a valid header value, at most MaxAccessToken bytes, with a
// lifetime from expires_in (DefaultTokenLifetime when absent or zero, at
// most MaxTokenLifetime; a negative one is invalid).
func interpretToken(t *oauth2.Token) (string, time.Duration, error) {
	v := t.AccessToken
	switch {
	case v == "":
		return "", 0, errors.New("no access_token")
	case len(v) > MaxAccessToken:
		return "", 0, fmt.Errorf("the access_token is longer than %d bytes", MaxAccessToken)
	case !httpguts.ValidHeaderFieldValue(v) || strings.ContainsAny(v, "\r\n\t ") || !utf8.ValidString(v):
		return "", 0, errors.New("the access_token is not a valid header value")
	}
	if typ := t.TokenType; typ != "" && !strings.EqualFold(typ, "bearer") {
		return "", 0, fmt.Errorf("token_type %q is not Bearer", excerpt(typ, ""))
	}
	lifetime, err := parseExpiresIn(t.Extra("expires_in"))
	if err != nil {
		return "", 0, err
	}
	return v, lifetime, nil
}

// parseExpiresIn reads expires_in as Token.Extra gives it (a JSON number
// as float64, or a string for endpoints that quote it; from a form-encoded
// answer an int64, a float64 or a string): whole seconds, at most MaxTokenLifetime (larger values are
// capped). Absent, null, empty or 0 mean DefaultTokenLifetime; a
// negative, not finite, unparsable or sub-second value is an error.
func parseExpiresIn(v any) (time.Duration, error) {
	var secs float64
	switch x := v.(type) {
	case nil:
		return DefaultTokenLifetime, nil
	case float64:
		secs = x
	case int64: // Token.Extra's reading of a form-encoded answer
		secs = float64(x)
	case string:
		if x == "" {
			return DefaultTokenLifetime, nil
		}
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, fmt.Errorf("expires_in %q is not a number", excerpt(x, ""))
		}
		secs = f
	default:
		return 0, errors.New("expires_in is not a number")
	}
	switch {
	case math.IsNaN(secs) || math.IsInf(secs, 0):
		return 0, errors.New("expires_in is not a finite number")
	case secs < 0:
		return 0, fmt.Errorf("expires_in %v is negative", secs)
	case secs == 0:
		return DefaultTokenLifetime, nil
	case secs >= MaxTokenLifetime.Seconds():
		return MaxTokenLifetime, nil
	}
	d := time.Duration(secs * float64(time.Second))
	if d < time.Second {
		return 0, fmt.Errorf("expires_in %v is shorter than a second", secs)
	}
	return d, nil
}

// excerpt is at most tokenErrorExcerpt bytes of s, valid UTF-8 with
// control characters replaced, and with secret (when not empty) replaced.
func excerpt(s, secret string) string {
	if secret != "" {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	cut := len(s) > tokenErrorExcerpt
	if cut {
		s = s[:tokenErrorExcerpt]
	}
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if cut {
		s += "…"
	}
	return s
}

// redactError replaces secret in err's text (the cause must name none,
// whatever an endpoint or a library put in it).
func redactError(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[redacted]"))
}

// recordingTransport records a transport failure (no response, or a body
// that could not be read), which x/oauth2 does not tell apart from a
// response that is no token.
type recordingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	err  error
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.record(err)
		return nil, err
	}
	resp.Body = &recordingBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

func (t *recordingTransport) record(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry query values
		}
		t.err = err
	}
}

func (t *recordingTransport) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

type recordingBody struct {
	io.ReadCloser
	t *recordingTransport
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.t.record(err)
	}
	return n, err
}
