package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Holder keeps the current configuration for a running broker and replaces
// it on Reload. Readers call Directory on every request; a reload swaps the
// snapshot atomically, so a request sees either the old or the new
// configuration, never a mix. A reload that fails keeps the last good
// configuration. Holder is safe for concurrent use.
type Holder struct {
	path     string
	cur      atomic.Pointer[Directory]
	logger   *slog.Logger
	onReload func(*Directory)
	signals  <-chan os.Signal
	debounce time.Duration
	now      func() time.Time
	loadOpts []LoadOption

	mu       sync.Mutex // serialises reloads
	lastSeen [32]byte   // digest of the last file content tried

	reloads         *prometheus.CounterVec
	reloadFailures  prometheus.Counter
	tenants         prometheus.Gauge
	lastSuccess     prometheus.Gauge
	lastSuccessTime prometheus.Gauge

	// watchReady, when set (tests), is closed once Watch watches.
	watchReady chan struct{}
}

// HolderOption configures a Holder.
type HolderOption func(*Holder)

// WithLogger sets the logger for reloads; the default is slog.Default().
func WithLogger(l *slog.Logger) HolderOption {
	return func(h *Holder) {
		if l != nil {
			h.logger = l
		}
	}
}

// WithLoadOptions sets the options of every load and reload (for example
// WithCredentialDeps).
func WithLoadOptions(opts ...LoadOption) HolderOption {
	return func(h *Holder) { h.loadOpts = append(h.loadOpts, opts...) }
}

// WithOnReload calls fn with the new directory after each successful
// reload (not after the initial load), on the reloading goroutine.
func WithOnReload(fn func(*Directory)) HolderOption {
	return func(h *Holder) { h.onReload = fn }
}

// WithSignals makes Watch reload on every value received from ch instead
// of on SIGHUP. Tests use it to send a reload without a real signal.
func WithSignals(ch <-chan os.Signal) HolderOption {
	return func(h *Holder) { h.signals = ch }
}

// WithDebounce sets how long Watch waits after the last file-system event
// before it reloads (default DefaultDebounce). Editors and Kubernetes
// replace files in several steps; the wait lets them finish.
func WithDebounce(d time.Duration) HolderOption {
	return func(h *Holder) {
		if d > 0 {
			h.debounce = d
		}
	}
}

// DefaultDebounce is the default quiet period before a file change is
// reloaded.
const DefaultDebounce = 100 * time.Millisecond

// NewHolder loads the configuration at path and returns a Holder serving
// it. An invalid file is an error (an *Error listing every problem): the
// broker should not start with a configuration it cannot read.
//
// Metrics are registered with reg; a nil reg registers none (they are still
// kept). They are:
//
//	retrybroker_config_reloads_total{result="success"|"failure"}  counter
//	retrybroker_config_reload_failures_total                       counter
//	retrybroker_config_tenants                                     gauge
//	retrybroker_config_last_reload_successful                      gauge (1 or 0)
//	retrybroker_config_last_reload_success_timestamp_seconds      gauge
//
// Registering twice with the same registry fails with an
// AlreadyRegisteredError.
func NewHolder(path string, reg prometheus.Registerer, opts ...HolderOption) (*Holder, error) {
	h := &Holder{
		path:     path,
		logger:   slog.Default(),
		debounce: DefaultDebounce,
		now:      time.Now,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_config_reloads_total",
			Help: "Configuration reloads by result (success or failure); the initial load is not counted.",
		}, []string{"result"}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_config_reload_failures_total",
			Help: "Configuration reloads that failed and kept the last good configuration.",
		}),
		tenants: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_config_tenants",
			Help: "Number of tenants in the configuration being served.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_config_last_reload_successful",
			Help: "Whether the last configuration load or reload succeeded (1) or failed (0).",
		}),
		lastSuccessTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load or reload.",
		}),
	}
	for _, o := range opts {
		o(h)
	}
	// Both results exist from the start, so rate() works before the first
	// failure.
	h.reloads.WithLabelValues("success")
	h.reloads.WithLabelValues("failure")

	d, err := Load(path, h.loadOpts...)
	if err != nil {
		return nil, err
	}
	h.store(d)
	if reg != nil {
		for _, c := range []prometheus.Collector{h.reloads, h.reloadFailures, h.tenants, h.lastSuccess, h.lastSuccessTime} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register configuration metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Path returns the configuration file's path.
func (h *Holder) Path() string { return h.path }

// Directory returns the configuration being served; never nil.
func (h *Holder) Directory() *Directory { return h.cur.Load() }

// store swaps in d and updates the gauges.
func (h *Holder) store(d *Directory) {
	h.cur.Store(d)
	h.lastSeen = d.digest
	h.tenants.Set(float64(d.Len()))
	h.lastSuccess.Set(1)
	h.lastSuccessTime.Set(float64(h.now().UnixNano()) / 1e9)
}

// Reload reads the file again and, when it is valid, serves it from now
// on. When it is not, the current configuration stays, the failure is
// logged with every problem, the failure counters increase, and the error
// is returned.
func (h *Holder) Reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reloadLocked(false)
}

// reloadLocked reloads; with ifChanged it does nothing when the file's
// content is the one last tried (file-system events on other files, or
// repeated events for one change).
func (h *Holder) reloadLocked(ifChanged bool) error {
	start := h.now()
	data, err := os.ReadFile(h.path)
	if err != nil {
		err = fmt.Errorf("read configuration: %w", err)
		h.fail(err)
		return err
	}
	if ifChanged {
		if sum := digestOf(data); sum == h.lastSeen {
			return nil
		}
	}
	// Credentials whose configuration did not change are kept, with their
	// tokens and secret files' state; the others are built anew.
	opts := append(slices.Clone(h.loadOpts), keepCredentials(h.cur.Load()))
	d, err := Parse(h.path, data, opts...)
	if err != nil {
		h.lastSeen = digestOf(data)
		h.fail(err)
		return err
	}
	old := h.cur.Load()
	h.store(d)
	h.reloads.WithLabelValues("success").Inc()
	h.logger.Info("configuration reloaded",
		"file", h.path,
		"tenants", d.Len(),
		"policies", d.PolicyCount(),
		"previous_tenants", old.Len(),
		"sha256", hex.EncodeToString(d.digest[:8]),
		"took", h.now().Sub(start).Round(time.Millisecond).String())
	if h.onReload != nil {
		h.onReload(d)
	}
	return nil
}

// fail records a failed reload.
func (h *Holder) fail(err error) {
	h.reloads.WithLabelValues("failure").Inc()
	h.reloadFailures.Inc()
	h.lastSuccess.Set(0)
	attrs := []any{"file", h.path, "kept_tenants", h.cur.Load().Len()}
	var ce *Error
	if errors.As(err, &ce) {
		problems := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			problems[i] = p.Error()
		}
		attrs = append(attrs, "problems", problems)
	} else {
		attrs = append(attrs, "error", err.Error())
	}
	h.logger.Error("configuration reload failed; still serving the last good configuration", attrs...)
}
