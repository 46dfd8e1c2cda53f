package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Client timeouts applied unless the Redis URL sets them.
const (
	// DefaultDialTimeout bounds establishing one connection.
	DefaultDialTimeout = 500 * time.Millisecond
	// DefaultIOTimeout bounds one socket read or write, and waiting for a
	// pooled connection.
	DefaultIOTimeout = 500 * time.Millisecond
)

// preloadTimeout bounds the script preload in New.
const preloadTimeout = 250 * time.Millisecond

// keyMargin is how long keys outlive the state they hold, so that replicas
// with slightly different clocks still find it.
const keyMargin = 10 * time.Second

// maxRemaining caps the remaining count passed to the scripts: Lua numbers
// are doubles, exact up to 2^53, and no provider's quota comes near.
const maxRemaining = 1 << 52

// Option configures a Store.
type Option func(*options)

type options struct {
	ticketTTL time.Duration
	prefix    string
	tune      []func(*redis.Options)
}

// WithTicketTTL sets how long an in-flight registration lives when it is
// never completed; zero or negative keeps store.DefaultTicketTTL. Every
// replica sharing the Redis should use the same value.
func WithTicketTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ticketTTL = d
		}
	}
}

// WithKeyPrefix replaces DefaultKeyPrefix, for instance to share one Redis
// database between deployments. The prefix must not contain '{' or '}'
// (New reports an error).
func WithKeyPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// WithRedisOptions lets fn adjust the client options after they were parsed
// from the URL and the package defaults were applied. New only; ignored by
// NewFromClient.
func WithRedisOptions(fn func(*redis.Options)) Option {
	return func(o *options) { o.tune = append(o.tune, fn) }
}

// Store is a store.Store kept in Redis. Create it with New or NewFromClient.
type Store struct {
	client    redis.UniversalClient
	keys      keys
	ticketTTL int64 // µs
	marginMS  int64
	tolUS     int64 // store.QuotaWindowTolerance, µs
	idPrefix  string
	nextID    atomic.Uint64
	closed    atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New connects to the Redis at rawURL ("redis://[user:password@]host:port/db",
// "rediss://..." for TLS, or "unix:///path"; query parameters such as
// dial_timeout are honoured). It fails only on an invalid URL or option:
// a Redis that is down is reported by the operations, never by New. ctx
// bounds a best-effort script preload (at most 250 ms; without it the first
// call of each script costs one more round trip).
func New(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("redisstore: invalid Redis URL %s: %w", Redact(rawURL), err)
	}
	o := buildOptions(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	applyDefaults(ro)
	for _, fn := range o.tune {
		fn(ro)
	}
	s := newStore(redis.NewClient(ro), o)
	s.preload(ctx)
	return s, nil
}

// NewFromClient returns a Store using client, which it owns from then on:
// Close closes it. Set short timeouts and ContextTimeoutEnabled on the
// client; New shows the defaults. Keys of one tenant share a hash tag, so a
// cluster client works too.
func NewFromClient(client redis.UniversalClient, opts ...Option) (*Store, error) {
	o := buildOptions(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	return newStore(client, o), nil
}

func buildOptions(opts []Option) options {
	o := options{ticketTTL: store.DefaultTicketTTL, prefix: DefaultKeyPrefix}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o options) validate() error {
	if strings.ContainsAny(o.prefix, "{}") {
		return errors.New("redisstore: key prefix must not contain '{' or '}'")
	}
	return nil
}

// applyDefaults shortens timeouts the URL left unset, so that an outage
// fails calls quickly instead of hanging them.
func applyDefaults(ro *redis.Options) {
	if ro.DialTimeout == 0 {
		ro.DialTimeout = DefaultDialTimeout
	}
	if ro.ReadTimeout == 0 {
		ro.ReadTimeout = DefaultIOTimeout
	}
	if ro.WriteTimeout == 0 {
		ro.WriteTimeout = DefaultIOTimeout
	}
	if ro.PoolTimeout == 0 {
		ro.PoolTimeout = DefaultIOTimeout
	}
	if ro.MaxRetries == 0 {
		ro.MaxRetries = 1
	}
	if ro.MinRetryBackoff == 0 {
		ro.MinRetryBackoff = 8 * time.Millisecond
	}
	if ro.MaxRetryBackoff == 0 {
		ro.MaxRetryBackoff = 64 * time.Millisecond
	}
	if ro.DialerRetries == 0 {
		ro.DialerRetries = 1
	}
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	if ro.MaintNotificationsConfig == nil {
		ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
}

func newStore(client redis.UniversalClient, o options) *Store {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return &Store{
		client:    client,
		keys:      keys{prefix: o.prefix},
		ticketTTL: int64(o.ticketTTL / time.Microsecond),
		marginMS:  int64(keyMargin / time.Millisecond),
		tolUS:     int64(store.QuotaWindowTolerance / time.Microsecond),
		idPrefix:  "r" + hex.EncodeToString(b[:]) + ".",
	}
}

func (s *Store) preload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, preloadTimeout)
	defer cancel()
	for _, sc := range []*redis.Script{admitScript, completeScript, stateScript} {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return
		}
	}
}

// Redact returns rawURL with its password replaced by "xxxxx", or
// "(unparsable URL)" when it cannot be parsed; safe to log.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UnixMicro()
}

func timeOf(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// wrap turns a client error into one that wraps store.ErrUnavailable (or
// store.ErrClosed) and the cause.
func (s *Store) wrap(op string, err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		return fmt.Errorf("redisstore: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
}

// Admit implements store.Store in one script call. The ticket id is made
// up beforehand and used only when the script registers the attempt (the
// gate has a known quota); otherwise the Ticket is empty.
func (s *Store) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	now := micros(req.Now)
	window := int64(0)
	if req.FirstAttempt && !req.Budget.Unlimited() {
		window = req.Budget.WindowSeconds()
	}
	id := s.idPrefix + strconv.FormatUint(s.nextID.Add(1), 36)
	g := req.Gate
	res, err := admitScript.Run(ctx, s.client,
		[]string{s.keys.gate(g), s.keys.inflight(g), s.keys.pace(g.Tenant, req.PaceHost), s.keys.budget(g.Tenant), s.keys.quota(g)},
		now, id, s.ticketTTL,
		int64(req.Pace.Interval()/time.Microsecond), req.Pace.BurstOrOne(),
		int64(max(req.PaceMaxWait, 0)/time.Microsecond),
		window, s.marginMS,
	).Int64Slice()
	if err != nil {
		return store.Admission{}, s.wrap("admit", err)
	}
	if len(res) != 4 {
		return store.Admission{}, fmt.Errorf("redisstore: admit: %w: unexpected reply", store.ErrUnavailable)
	}
	wait := time.Duration(res[2]) * time.Microsecond
	switch res[0] {
	case 0:
		adm := store.Admission{PaceWait: wait}
		if res[3] == 1 { // registered: the gate has a known quota
			adm.Ticket = store.Ticket{ID: id}
		}
		return adm, nil
	case 1:
		return store.Admission{GateClosedUntil: timeOf(res[1])}, nil
	default:
		return store.Admission{PaceDenied: true, PaceWait: wait}, nil
	}
}

// Complete implements store.Store in one script call.
func (s *Store) Complete(ctx context.Context, req store.CompleteRequest) (store.CompleteResult, error) {
	until, allowed, err := s.complete(ctx, "complete", req.Gate, req.Ticket.ID, req.Obs, req.SpendRetry, req.Budget, micros(req.Now), req.MaxGate)
	if err != nil {
		return store.CompleteResult{}, err
	}
	return store.CompleteResult{RetryAllowed: allowed, GateClosedUntil: until}, nil
}

// Observe implements store.Store in one script call.
func (s *Store) Observe(ctx context.Context, req store.ObserveRequest) (store.GateStatus, error) {
	until, _, err := s.complete(ctx, "observe", req.Gate, "", req.Obs, false, store.BudgetConfig{}, micros(req.Now), req.MaxGate)
	return store.GateStatus{ClosedUntil: until}, err
}

func (s *Store) complete(ctx context.Context, op string, g store.GateKey, ticket string, obs store.Observation,
	spend bool, budget store.BudgetConfig, now int64, maxGate time.Duration,
) (time.Time, bool, error) {
	if maxGate <= 0 {
		maxGate = store.DefaultMaxGate
	}
	limit := now + int64(maxGate/time.Microsecond)
	closeUntil, hasQuota, reset := int64(0), "0", int64(0)
	if !obs.CloseUntil.IsZero() {
		closeUntil = min(obs.CloseUntil.UnixMicro(), limit)
	}
	if obs.HasQuota && !obs.Reset.IsZero() {
		hasQuota, reset = "1", min(obs.Reset.UnixMicro(), limit)
	}
	spendArg, window := "0", int64(0)
	if spend {
		spendArg = "1"
		if !budget.Unlimited() {
			window = budget.WindowSeconds()
		}
	}
	res, err := completeScript.Run(ctx, s.client,
		[]string{s.keys.gate(g), s.keys.inflight(g), s.keys.budget(g.Tenant), s.keys.quota(g)},
		now, ticket, closeUntil, hasQuota, min(max(obs.Remaining, 0), maxRemaining), reset,
		spendArg, window,
		strconv.FormatFloat(budget.RatioOrZero(), 'g', -1, 64),
		strconv.FormatFloat(budget.FloorTotal(), 'g', -1, 64),
		s.marginMS, s.tolUS,
	).Int64Slice()
	if err != nil {
		return time.Time{}, false, s.wrap(op, err)
	}
	if len(res) != 2 {
		return time.Time{}, false, fmt.Errorf("redisstore: %s: %w: unexpected reply", op, store.ErrUnavailable)
	}
	return timeOf(res[0]), res[1] == 1, nil
}

// GateState implements store.Store in one (read-only) script call.
func (s *Store) GateState(ctx context.Context, gate store.GateKey, now time.Time) (store.GateStatus, error) {
	v, err := stateScript.Run(ctx, s.client,
		[]string{s.keys.gate(gate), s.keys.inflight(gate), s.keys.quota(gate)}, micros(now)).Int64()
	if err != nil {
		return store.GateStatus{}, s.wrap("gate state", err)
	}
	return store.GateStatus{ClosedUntil: timeOf(v)}, nil
}

// InFlight implements store.InFlightCounter: one ZCOUNT.
func (s *Store) InFlight(ctx context.Context, gate store.GateKey, now time.Time) (int64, error) {
	n, err := s.client.ZCount(ctx, s.keys.inflight(gate), "("+strconv.FormatInt(micros(now), 10), "+inf").Result()
	if err != nil {
		return 0, s.wrap("in flight", err)
	}
	return n, nil
}

// Ping checks that Redis answers; store.Fallback uses it to probe for
// recovery.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return s.wrap("ping", err)
	}
	return nil
}

// Close closes the client. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}
