package config

import (
	"errors"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Bounds of the breaker and learning options.
const (
	// MaxBreakerOpen bounds breaker.max_open.
	MaxBreakerOpen = 24 * time.Hour
	// minBreakerWindow is the shortest breaker.window.
	minBreakerWindow = time.Second
)

// asIssues returns the problems of a decoding error.
func asIssues(err error) issues {
	var is issues
	if err != nil && !errors.As(err, &is) {
		is = issues{{msg: err.Error()}}
	}
	return is
}

// finish records whether a section had problems and returns them.
func (s *section) finish(errs issues) error {
	s.bad = len(errs) > 0
	return errs.err()
}

// backoffDoc is a policy's backoff.
type backoffDoc struct {
	section
	Base   *duration `yaml:"base"`
	Factor *number   `yaml:"factor"`
	Cap    *duration `yaml:"cap"`
	Jitter *jitter   `yaml:"jitter"`
}

// UnmarshalYAML decodes the backoff mapping; the engine checks the ranges.
func (b *backoffDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &b.section, b, wantMapping)
}

// applyTo sets the keys b sets.
func (b *backoffDoc) applyTo(dst *engine.Backoff) {
	set(&dst.Base, b.Base)
	set(&dst.Factor, b.Factor)
	set(&dst.Cap, b.Cap)
	set(&dst.Jitter, b.Jitter)
}

// streamDoc is a policy's stream limits.
type streamDoc struct {
	section
	MaxConcurrent *intIn[streamsRange] `yaml:"max_concurrent"`
	IdleTimeout   *duration            `yaml:"idle_timeout"`
	MaxDuration   *duration            `yaml:"max_duration"`
	MaxBytes      *size                `yaml:"max_bytes"`
}

// UnmarshalYAML decodes the stream mapping; the engine checks the ranges
// of the durations and sizes.
func (s *streamDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &s.section, s, wantMapping)
}

// applyTo sets the keys s sets.
func (s *streamDoc) applyTo(dst *engine.StreamLimits) {
	set(&dst.MaxConcurrent, s.MaxConcurrent)
	set(&dst.IdleTimeout, s.IdleTimeout)
	set(&dst.MaxDuration, s.MaxDuration)
	set(&dst.MaxBytes, s.MaxBytes)
}

// budgetDoc is a policy's retry budget.
type budgetDoc struct {
	section
	Disabled       *boolean  `yaml:"disabled"`
	Ratio          *number   `yaml:"ratio"`
	FloorPerSecond *number   `yaml:"floor_per_second"`
	Window         *duration `yaml:"window"`
}

// UnmarshalYAML decodes the budget mapping and checks each value's range.
func (b *budgetDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &b.section, b, wantMapping))
	if r := b.Ratio; r != nil && (r.V < 0 || r.V > MaxBudgetRatio) {
		errs.addf(r.node, ".ratio", "must be between 0 and %d, got %g", MaxBudgetRatio, r.V)
	}
	if f := b.FloorPerSecond; f != nil && f.V < 0 {
		errs.addf(f.node, ".floor_per_second", "must not be negative, got %g", f.V)
	}
	if w := b.Window; w != nil && (w.V < time.Second || w.V > MaxBudgetWindowSeconds*time.Second) {
		errs.addf(w.node, ".window", "must be between 1s and 1h, got %s", w.V)
	}
	return b.finish(errs)
}

// apply returns the budget of a policy that inherits cur and sets b. A
// budget that was disabled starts again from store.DefaultBudget() when b
// enables it. On error cur is returned.
func (b *budgetDoc) apply(cur store.BudgetConfig) (store.BudgetConfig, error) {
	disabled := b.Disabled != nil && b.Disabled.V
	switch {
	case disabled && (b.Ratio != nil || b.FloorPerSecond != nil || b.Window != nil):
		return cur, issues{{node: b.Disabled.node, path: ".disabled", msg: "a disabled budget takes no ratio, floor_per_second or window"}}
	case disabled:
		return store.BudgetConfig{}, nil
	}
	next := cur
	if next.Unlimited() {
		next = store.DefaultBudget()
	}
	set(&next.Ratio, b.Ratio)
	set(&next.FloorPerSecond, b.FloorPerSecond)
	set(&next.Window, b.Window)
	if next.Unlimited() {
		return cur, errAt(b.node, "ratio and floor_per_second are both 0, which would allow unlimited retries; write budget: {disabled: true} if that is what you mean, or set max_retries: 0 for no retries")
	}
	return next, nil
}

// pacingDoc is a policy's pacing.
type pacingDoc struct {
	section
	Disabled *boolean           `yaml:"disabled"`
	Rate     *number            `yaml:"rate"`
	Burst    *intIn[burstRange] `yaml:"burst"`
}

// UnmarshalYAML decodes the pacing mapping and checks the rate.
func (p *pacingDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &p.section, p, wantMapping))
	if r := p.Rate; r != nil && (!(r.V > 0) || r.V > MaxPaceRate) {
		errs.addf(r.node, ".rate", "must be above 0 and at most %d requests per second, got %g (omit pacing, or write pacing: {disabled: true}, to turn it off)", MaxPaceRate, r.V)
	}
	return p.finish(errs)
}

// apply returns the pacing of a policy that inherits cur and sets p. On
// error cur is returned.
func (p *pacingDoc) apply(cur store.PaceConfig) (store.PaceConfig, error) {
	disabled := p.Disabled != nil && p.Disabled.V
	switch {
	case disabled && (p.Rate != nil || p.Burst != nil):
		return cur, issues{{node: p.Disabled.node, path: ".disabled", msg: "disabled pacing takes no rate or burst"}}
	case disabled:
		return store.PaceConfig{}, nil
	case p.Rate == nil && !cur.Enabled():
		return cur, issues{{node: p.node, path: ".rate", msg: "missing: pacing needs a rate in requests per second"}}
	}
	next := cur
	set(&next.Rate, p.Rate)
	set(&next.Burst, p.Burst)
	next.Burst = max(next.Burst, 1)
	return next, nil
}

// learningDoc is a policy's learned quotas.
type learningDoc struct {
	section
	Disabled    *boolean  `yaml:"disabled"`
	IdleExpiry  *duration `yaml:"idle_expiry"`
	FirstWindow *boolean  `yaml:"first_window"`
	ScoutHold   *duration `yaml:"scout_hold"`
}

// UnmarshalYAML decodes the learning mapping and checks idle_expiry and
// scout_hold.
func (c *learningDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &c.section, c, wantMapping))
	if e := c.IdleExpiry; e != nil && (e.V <= 0 || e.V > store.MaxLearningIdleExpiry) {
		errs.addf(e.node, ".idle_expiry", "must be positive and at most 168h (7 days), got %s", e.V)
	}
	if e := c.ScoutHold; e != nil && (e.V <= 0 || e.V > store.MaxScoutHold) {
		errs.addf(e.node, ".scout_hold", "must be positive and at most 1m, got %s", e.V)
	}
	return c.finish(errs)
}

// apply returns the learning of a policy that inherits cur and sets c.
// Learning that was disabled starts again from store.DefaultLearning()
// when c enables it. On error cur is returned.
func (c *learningDoc) apply(cur store.LearningConfig) (store.LearningConfig, error) {
	disabled := c.Disabled != nil && c.Disabled.V
	switch {
	case disabled && (c.IdleExpiry != nil || c.FirstWindow != nil || c.ScoutHold != nil):
		return cur, issues{{node: c.Disabled.node, path: ".disabled", msg: "disabled learning takes no other key"}}
	case disabled:
		return store.LearningConfig{}, nil
	}
	next := cur
	if !next.Enabled {
		next = store.DefaultLearning()
	}
	set(&next.IdleExpiry, c.IdleExpiry)
	if c.FirstWindow != nil {
		next.FirstWindowOff = !c.FirstWindow.V
	}
	set(&next.ScoutHold, c.ScoutHold)
	return next, nil
}

// breakerDoc is a policy's failure breaker.
type breakerDoc struct {
	section
	Disabled     *boolean              `yaml:"disabled"`
	MinCalls     *intIn[minCallsRange] `yaml:"min_calls"`
	FailureRatio *number               `yaml:"failure_ratio"`
	Window       *duration             `yaml:"window"`
	OpenFor      *duration             `yaml:"open_for"`
	MaxOpen      *duration             `yaml:"max_open"`
}

// UnmarshalYAML decodes the breaker mapping and checks each value's range;
// apply checks max_open against open_for once both are known.
func (b *breakerDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &b.section, b, wantMapping))
	if r := b.FailureRatio; r != nil && (!(r.V > 0) || r.V > 1) {
		errs.addf(r.node, ".failure_ratio", "must be above 0 and at most 1, got %g", r.V)
	}
	if w := b.Window; w != nil && (w.V < minBreakerWindow || w.V > store.MaxBreakerWindow) {
		errs.addf(w.node, ".window", "must be between 1s and 10m, got %s", w.V)
	}
	if o := b.OpenFor; o != nil && o.V <= 0 {
		errs.addf(o.node, ".open_for", "must be positive, got %s", o.V)
	}
	if m := b.MaxOpen; m != nil && (m.V <= 0 || m.V > MaxBreakerOpen) {
		errs.addf(m.node, ".max_open", "must be positive and at most 24h, got %s", m.V)
	}
	return b.finish(errs)
}

// apply returns the breaker of a policy that inherits cur and sets b. A
// breaker that was disabled starts again from store.DefaultBreaker() when
// b enables it. On error cur is returned.
func (b *breakerDoc) apply(cur store.BreakerConfig) (store.BreakerConfig, error) {
	disabled := b.Disabled != nil && b.Disabled.V
	switch {
	case disabled && (b.MinCalls != nil || b.FailureRatio != nil || b.Window != nil || b.OpenFor != nil || b.MaxOpen != nil):
		return cur, issues{{node: b.Disabled.node, path: ".disabled", msg: "a disabled breaker takes no min_calls, failure_ratio, window, open_for or max_open"}}
	case disabled:
		return store.BreakerConfig{}, nil
	}
	next := cur
	if !next.Enabled {
		next = store.DefaultBreaker()
	}
	set(&next.MinCalls, b.MinCalls)
	set(&next.FailureRatio, b.FailureRatio)
	set(&next.Window, b.Window)
	set(&next.OpenFor, b.OpenFor)
	set(&next.MaxOpen, b.MaxOpen)
	switch {
	case next.MaxOpen >= next.OpenFor:
		return next, nil
	case b.MaxOpen != nil:
		return cur, issues{{node: b.MaxOpen.node, path: ".max_open", msg: "must be at least open_for (" + next.OpenFor.String() + "), got " + next.MaxOpen.String()}}
	default:
		return cur, issues{{node: b.OpenFor.node, path: ".open_for", msg: "must be at most max_open (" + next.MaxOpen.String() + "), got " + next.OpenFor.String()}}
	}
}

// customReaderDoc is one entry of custom_readers.
type customReaderDoc struct {
	section
	Header   *header         `yaml:"header"`
	Format   *str            `yaml:"format"`
	Position *readerPosition `yaml:"position"`

	reader providers.HintReader // nil unless the entry is valid
}

// UnmarshalYAML decodes the entry and builds its reader. A null entry is
// refused: it names no header.
func (c *customReaderDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &c.section, c, wantMapping))
	if !usable(errs.err(), n) {
		return c.finish(errs)
	}
	if c.key("header") == nil {
		errs.addf(n, ".header", "missing: name the header to read, for example X-Wait-Ms")
	}
	if c.key("format") == nil {
		errs.addf(n, ".format", "missing: want seconds, milliseconds, unix_seconds, retry_after or iso8601")
	}
	if c.Header == nil || c.Format == nil {
		return c.finish(errs)
	}
	rd, err := providers.NewCustomReader(c.Header.V, providers.Format(c.Format.V))
	switch {
	case errors.Is(err, providers.ErrUnknownFormat):
		errs.addf(c.Format.node, ".format", "unknown format %s (want seconds, milliseconds, unix_seconds, retry_after or iso8601)", describe(c.Format.V))
	case err != nil:
		errs.addf(c.Header.node, ".header", "%v", err)
	case len(errs) == 0:
		c.reader = rd
	}
	return c.finish(errs)
}

// hostProviders is a host_providers mapping: host pattern -> provider.
type hostProviders struct {
	dict[str, *str]
	// hosts holds the entries whose pattern is valid. Their provider names
	// are checked by the loader (checkHostNames), against the catalog of
	// the policies the mapping applies to.
	hosts map[string]string
}

// UnmarshalYAML decodes the mapping and checks each host pattern.
func (h *hostProviders) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(h.dict.UnmarshalYAML(n))
	h.hosts = make(map[string]string, len(h.Entries))
	for _, e := range h.Entries {
		if !e.OK {
			continue
		}
		host, name := e.Key.Value, e.V.V
		if _, err := providers.NewHostMap(map[string]string{host: "none"}); err != nil {
			errs.addf(e.Key, keySeg(host), "%s is not a host name or a *.suffix wildcard", describe(host))
			continue
		}
		h.hosts[host] = name
	}
	return errs.err()
}
