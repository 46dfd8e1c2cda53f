// Package fakeprovider is a small rate-limited HTTP API for the benchmark
// suite and its tests: a fixed-window quota of Quota calls per Window,
// announced in the style of GitHub, Azure, Jira, or a plain Retry-After API.
//
// Windows are aligned on Start: window k covers [Start+k·W, Start+(k+1)·W).
// For the GitHub and Jira styles, whose reset headers have a resolution of
// one second, Start must be a whole second and W a whole number of seconds,
// so the announced reset is exactly the window boundary.
//
// The provider records every call: its arrival time, its window, whether it
// was accepted, and whether it was an early send. An early send is a call
// that arrives while an announcement is in force: once the provider has told
// a client "do not call before T" (a refusal carrying a reset or a delay, or
// an accepted response reporting 0 calls remaining with its reset), every
// call that arrives after that answer and before T is early. There is one
// gate key, the whole provider: the benchmark uses one tenant and one
// credential. T is exactly what the client was told: the reset time for
// GitHub (x-ratelimit-reset) and Jira (X-RateLimit-Reset), arrival plus
// x-ms-retry-after-ms for Azure, and arrival plus Retry-After (whole
// seconds) for the Retry-After style.
//
// It only listens on 127.0.0.1.
package fakeprovider

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Style is the way the provider announces its quota.
type Style string

// Styles.
const (
	// GitHub refuses with 429 (or 403, see Config.RefusalStatus) carrying
	// x-ratelimit-remaining: 0 and x-ratelimit-reset in Unix seconds, and
	// sends x-ratelimit-limit / -remaining / -used / -reset on every
	// accepted call too. No Retry-After (GitHub's primary rate limit sends none).
	GitHub Style = "github"
	// Azure refuses with 429 carrying x-ms-retry-after-ms (milliseconds
	// until the window ends, rounded up); accepted calls carry no
	// rate-limit header, as with Azure services that answer a throttled
	// call with x-ms-retry-after-ms and say nothing before (Cosmos DB).
	// Resource Manager's x-ms-ratelimit-remaining-* counts are not sent:
	// they count a token bucket refilled every second, which the broker's
	// azure reader assumes (a reset 1 s after each answer), and the fixed
	// windows of this provider would contradict that assumption.
	Azure Style = "azure"
	// Jira refuses with 429 carrying X-RateLimit-Reset as an ISO 8601 time
	// (UTC, with seconds) and, only when Config.JiraRetryAfter is set,
	// Retry-After; accepted calls carry X-RateLimit-Limit, -Remaining and -Reset.
	Jira Style = "jira"
	// RetryAfter refuses with 429 carrying only Retry-After, in whole
	// seconds until the window ends, rounded up (so never before the
	// boundary, and up to a second after it); accepted calls carry no
	// rate-limit header at all. This is how most APIs answer (and how
	// the broker's default reader, "retry-after", reads them).
	RetryAfter Style = "retry-after"
)

// Styles lists every style.
var Styles = []Style{GitHub, Azure, Jira, RetryAfter}

// Config configures a Provider.
type Config struct {
	// Style chooses the headers. Required.
	Style Style
	// Quota is the number of calls accepted per window. Required (> 0).
	Quota int
	// Window is the window length W. Required; a whole number of seconds
	// for GitHub and Jira.
	Window time.Duration
	// Start is the beginning of window 0; a whole second for GitHub and
	// Jira. Zero means the first whole second after New.
	Start time.Time
	// Windows is how many windows are measured (0 .. Windows-1). Calls
	// outside them are still answered but counted apart (Stats.Outside).
	// Zero means 1.
	Windows int
	// RefusalStatus is the status of a GitHub refusal: 429 (default) or 403.
	// The other styles always refuse with 429.
	RefusalStatus int
	// JiraRetryAfter adds Retry-After (whole seconds, rounded up) to Jira
	// refusals. Jira often omits it; the default is to omit it.
	JiraRetryAfter bool
	// KeepArrivals records every arrival in Stats.Arrivals (bounded by
	// MaxArrivals). Counters are always kept.
	KeepArrivals bool
	// MaxArrivals bounds the recorded arrivals; zero means 1,000,000.
	MaxArrivals int
	// Now is the clock; nil means time.Now. Tests use a fake one.
	Now func() time.Time
}

// Arrival is one call as the provider saw it.
type Arrival struct {
	// At is when the call arrived.
	At time.Time
	// Window is the window index (negative before Start).
	Window int
	// Accepted is false for a refusal.
	Accepted bool
	// Early is true when the call arrived before an announced reset.
	Early bool
}

// WindowStats counts the calls of one measured window.
type WindowStats struct {
	Index    int
	Start    time.Time
	Accepted int
	Refused  int
	// Early counts early sends (accepted or refused).
	Early int
	// FirstRefusal is the arrival offset of the first refusal in the window
	// from the window start; -1 when there was none.
	FirstRefusal time.Duration
}

// Stats is a snapshot of what the provider saw.
type Stats struct {
	Style   Style
	Quota   int
	Window  time.Duration
	Start   time.Time
	Windows []WindowStats
	// Accepted, Refused and Early sum the measured windows.
	Accepted, Refused, Early int
	// Outside counts calls that arrived outside the measured windows.
	Outside int
	// Arrivals are every call, in arrival order, when Config.KeepArrivals.
	Arrivals []Arrival
}

// RefusedPerWindow is the mean number of refusals per measured window.
func (s Stats) RefusedPerWindow() float64 {
	if len(s.Windows) == 0 {
		return 0
	}
	return float64(s.Refused) / float64(len(s.Windows))
}

// Goodput is accepted calls over the quota of the measured windows.
func (s Stats) Goodput() float64 {
	if len(s.Windows) == 0 || s.Quota == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Quota*len(s.Windows))
}

// MaxRefusedInAWindow is the largest number of refusals in one window.
func (s Stats) MaxRefusedInAWindow() int {
	m := 0
	for _, w := range s.Windows {
		m = max(m, w.Refused)
	}
	return m
}

// From returns the statistics of the measured windows k and later only:
// Windows, Accepted, Refused and Early cover them, Outside and Arrivals
// are dropped. From(1) leaves out the first window, in which a client can
// know nothing of the quota before its first answer. k beyond the last
// window gives no windows (and zero rates).
func (s Stats) From(k int) Stats {
	out := Stats{Style: s.Style, Quota: s.Quota, Window: s.Window, Start: s.Start}
	if k < 0 {
		k = 0
	}
	if k < len(s.Windows) {
		out.Windows = append([]WindowStats(nil), s.Windows[k:]...)
		out.Start = out.Windows[0].Start
	}
	for _, w := range out.Windows {
		out.Accepted += w.Accepted
		out.Refused += w.Refused
		out.Early += w.Early
	}
	return out
}

// Provider is the fake API. It implements http.Handler.
type Provider struct {
	cfg Config
	now func() time.Time

	mu        sync.Mutex
	used      map[int]int // window -> accepted calls
	windows   []WindowStats
	outside   int
	announced time.Time // calls before this are early; zero = none
	arrivals  []Arrival
}

// New checks cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch cfg.Style {
	case GitHub, Azure, Jira, RetryAfter:
	default:
		return nil, fmt.Errorf("fakeprovider: unknown style %q", cfg.Style)
	}
	if cfg.Quota <= 0 {
		return nil, errors.New("fakeprovider: Quota must be positive")
	}
	if cfg.Window <= 0 {
		return nil, errors.New("fakeprovider: Window must be positive")
	}
	wholeSeconds := cfg.Style == GitHub || cfg.Style == Jira
	if wholeSeconds && cfg.Window%time.Second != 0 {
		return nil, fmt.Errorf("fakeprovider: %s announces resets in whole seconds: Window %v must be a whole number of seconds", cfg.Style, cfg.Window)
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.Now().Truncate(time.Second).Add(time.Second)
	}
	if wholeSeconds && cfg.Start.UnixNano()%int64(time.Second) != 0 {
		return nil, fmt.Errorf("fakeprovider: %s announces resets in whole seconds: Start %v must be a whole second", cfg.Style, cfg.Start)
	}
	if cfg.Windows <= 0 {
		cfg.Windows = 1
	}
	switch cfg.RefusalStatus {
	case 0:
		cfg.RefusalStatus = http.StatusTooManyRequests
	case http.StatusTooManyRequests, http.StatusForbidden:
	default:
		return nil, fmt.Errorf("fakeprovider: RefusalStatus must be 429 or 403, got %d", cfg.RefusalStatus)
	}
	if cfg.Style != GitHub {
		cfg.RefusalStatus = http.StatusTooManyRequests
	}
	if cfg.MaxArrivals <= 0 {
		cfg.MaxArrivals = 1_000_000
	}
	p := &Provider{cfg: cfg, now: cfg.Now, used: map[int]int{}}
	p.windows = make([]WindowStats, cfg.Windows)
	for i := range p.windows {
		p.windows[i] = WindowStats{Index: i, Start: p.WindowStart(i), FirstRefusal: -1}
	}
	return p, nil
}

// Config returns the provider's configuration, defaults filled in.
func (p *Provider) Config() Config { return p.cfg }

// WindowStart returns the start of window k.
func (p *Provider) WindowStart(k int) time.Time {
	return p.cfg.Start.Add(time.Duration(k) * p.cfg.Window)
}

// End returns the end of the last measured window.
func (p *Provider) End() time.Time { return p.WindowStart(p.cfg.Windows) }

// windowOf returns the index of the window holding t (floor division).
func (p *Provider) windowOf(t time.Time) int {
	d := t.Sub(p.cfg.Start)
	k := int(d / p.cfg.Window)
	if d < 0 && d%p.cfg.Window != 0 {
		k--
	}
	return k
}

// ServeHTTP answers one call: accepted while the window has quota left,
// refused otherwise. The body is a small JSON document.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	now := p.now()
	k := p.windowOf(now)
	reset := p.WindowStart(k + 1)
	early := now.Before(p.announced)
	accepted := p.used[k] < p.cfg.Quota
	remaining := 0
	if accepted {
		p.used[k]++
		remaining = p.cfg.Quota - p.used[k]
	}
	// Announce: a refusal always tells the client when to come back; an
	// accepted call does when it reports 0 remaining (GitHub, Jira). The
	// Retry-After and Azure styles announce nothing on accepted calls.
	var until time.Time
	retryMS, retryS := int64(0), int64(0)
	switch {
	case !accepted && p.cfg.Style == Azure:
		retryMS = ceilDiv(int64(reset.Sub(now)), int64(time.Millisecond))
		until = now.Add(time.Duration(retryMS) * time.Millisecond)
	case !accepted && p.cfg.Style == RetryAfter:
		retryS = ceilDiv(int64(reset.Sub(now)), int64(time.Second))
		until = now.Add(time.Duration(retryS) * time.Second)
	case !accepted, remaining == 0 && (p.cfg.Style == GitHub || p.cfg.Style == Jira):
		until = reset
	}
	if until.After(p.announced) {
		p.announced = until
	}
	if k >= 0 && k < len(p.windows) {
		ws := &p.windows[k]
		if accepted {
			ws.Accepted++
		} else {
			ws.Refused++
			if ws.FirstRefusal < 0 {
				ws.FirstRefusal = now.Sub(ws.Start)
			}
		}
		if early {
			ws.Early++
		}
	} else {
		p.outside++
	}
	if p.cfg.KeepArrivals && len(p.arrivals) < p.cfg.MaxArrivals {
		p.arrivals = append(p.arrivals, Arrival{At: now, Window: k, Accepted: accepted, Early: early})
	}
	p.mu.Unlock()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	status := http.StatusOK
	switch p.cfg.Style {
	case GitHub:
		h.Set("X-Ratelimit-Limit", strconv.Itoa(p.cfg.Quota))
		h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-Ratelimit-Used", strconv.Itoa(p.cfg.Quota-remaining))
		h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		h.Set("X-Ratelimit-Resource", "core")
		if !accepted {
			status = p.cfg.RefusalStatus
		}
	case Azure:
		if !accepted {
			h.Set("X-Ms-Retry-After-Ms", strconv.FormatInt(retryMS, 10))
			status = http.StatusTooManyRequests
		}
	case Jira:
		h.Set("X-Ratelimit-Limit", strconv.Itoa(p.cfg.Quota))
		h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-Ratelimit-Reset", reset.UTC().Format("2006-01-02T15:04:05Z"))
		if !accepted {
			status = http.StatusTooManyRequests
			if p.cfg.JiraRetryAfter {
				h.Set("Retry-After", strconv.FormatInt(ceilDiv(int64(reset.Sub(now)), int64(time.Second)), 10))
			}
		}
	case RetryAfter:
		if !accepted {
			h.Set("Retry-After", strconv.FormatInt(retryS, 10))
			status = http.StatusTooManyRequests
		}
	}
	w.WriteHeader(status)
	if accepted {
		_, _ = fmt.Fprintf(w, `{"ok":true,"window":%d}`, k)
	} else {
		_, _ = w.Write([]byte(`{"message":"API rate limit exceeded"}`))
	}
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// Stats returns a snapshot of the counters (and arrivals, when kept).
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Style: p.cfg.Style, Quota: p.cfg.Quota, Window: p.cfg.Window, Start: p.cfg.Start,
		Windows: append([]WindowStats(nil), p.windows...), Outside: p.outside,
		Arrivals: append([]Arrival(nil), p.arrivals...),
	}
	for _, w := range s.Windows {
		s.Accepted += w.Accepted
		s.Refused += w.Refused
		s.Early += w.Early
	}
	return s
}

// Server is a Provider listening on 127.0.0.1.
type Server struct {
	*Provider
	srv *http.Server
	lis net.Listener
	url string
}

// Start starts a provider on a free 127.0.0.1 port.
func Start(cfg Config) (*Server, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	s := &Server{
		Provider: p, lis: lis, url: "http://" + lis.Addr().String(),
		srv: &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute},
	}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// URL returns the base URL, e.g. http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// Close stops the server at once and closes every connection.
func (s *Server) Close() error { return s.srv.Close() }
