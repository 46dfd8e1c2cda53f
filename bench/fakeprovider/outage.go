package fakeprovider

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// OutageConfig configures an Outage upstream.
type OutageConfig struct {
	// DownFrom and DownUntil bound the outage [DownFrom, DownUntil): a call
	// arriving in it is answered 503 with no hint (no Retry-After, no
	// rate-limit header), every other call 200. Required; DownUntil must
	// be after DownFrom.
	DownFrom, DownUntil time.Time
	// MaxArrivals bounds the arrival times kept in OutageStats.Arrivals;
	// zero means 1,000,000. The counters are always exact.
	MaxArrivals int
	// Now is the clock; nil means time.Now. Tests use a fake one.
	Now func() time.Time
}

// OutageStats is what an Outage upstream saw.
type OutageStats struct {
	DownFrom, DownUntil time.Time
	// Before, During and After count the calls that arrived before the
	// outage, during it (all answered 503) and after it (all answered 200).
	Before, During, After int
	// FirstAfter is the arrival time of the first call at or after
	// DownUntil: the first success after the recovery. Zero when no call
	// came after the outage.
	FirstAfter time.Time
	// Arrivals are the arrival times of the calls, in arrival order, at
	// most OutageConfig.MaxArrivals of them.
	Arrivals []time.Time
}

// RecoveryDelay is FirstAfter − DownUntil: how long after the recovery the
// first call reached the upstream (and succeeded). ok is false when no
// call came after the outage.
func (s OutageStats) RecoveryDelay() (d time.Duration, ok bool) {
	if s.FirstAfter.IsZero() {
		return 0, false
	}
	return s.FirstAfter.Sub(s.DownUntil), true
}

// Outage is an upstream that fails for a while with no hint, then
// recovers. It implements http.Handler.
type Outage struct {
	cfg OutageConfig

	mu    sync.Mutex
	stats OutageStats
}

// NewOutage checks cfg and returns an outage upstream.
func NewOutage(cfg OutageConfig) (*Outage, error) {
	if cfg.DownFrom.IsZero() || !cfg.DownUntil.After(cfg.DownFrom) {
		return nil, errors.New("fakeprovider: an outage needs DownFrom and a later DownUntil")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxArrivals <= 0 {
		cfg.MaxArrivals = 1_000_000
	}
	return &Outage{cfg: cfg, stats: OutageStats{DownFrom: cfg.DownFrom, DownUntil: cfg.DownUntil}}, nil
}

// ServeHTTP answers 503 with no hint during the outage and 200 otherwise,
// with a small JSON body either way.
func (o *Outage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	o.mu.Lock()
	now := o.cfg.Now()
	down := false
	switch {
	case now.Before(o.cfg.DownFrom):
		o.stats.Before++
	case now.Before(o.cfg.DownUntil):
		o.stats.During++
		down = true
	default:
		o.stats.After++
		if o.stats.FirstAfter.IsZero() {
			o.stats.FirstAfter = now
		}
	}
	if len(o.stats.Arrivals) < o.cfg.MaxArrivals {
		o.stats.Arrivals = append(o.stats.Arrivals, now)
	}
	o.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if down {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"message":"service unavailable"}`))
		return
	}
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// Stats returns a snapshot of what the upstream saw.
func (o *Outage) Stats() OutageStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.Arrivals = append([]time.Time(nil), o.stats.Arrivals...)
	return s
}

// OutageServer is an Outage listening on 127.0.0.1.
type OutageServer struct {
	*Outage
	srv *http.Server
	url string
}

// StartOutage starts an outage upstream on a free 127.0.0.1 port.
func StartOutage(cfg OutageConfig) (*OutageServer, error) {
	o, err := NewOutage(cfg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	s := &OutageServer{
		Outage: o, url: "http://" + lis.Addr().String(),
		srv: &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute},
	}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// URL returns the base URL, e.g. http://127.0.0.1:PORT.
func (s *OutageServer) URL() string { return s.url }

// Close stops the server at once and closes every connection.
func (s *OutageServer) Close() error { return s.srv.Close() }
