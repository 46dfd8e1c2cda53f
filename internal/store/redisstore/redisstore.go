package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
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
	ticketTTL   time.Duration
	prefix      string
	dial, io    time.Duration
	tune        []func(*redis.Options)
	tuneCluster []func(*redis.ClusterOptions)
	tuneSent    []func(*redis.FailoverOptions)
	maxGates    int                 // see WithMaxGatesPerTenant
	localTTL    time.Duration       // see WithLocalAdmission; 0 = off
	untracked   func(tenant string) // see WithUntracked
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

// WithLocalAdmission sets how long a replica admits attempts on a plain
// gate (no known quota, no pacing, nothing learned, a closed breaker)
// without a round trip, after Redis reported it plain; zero or negative
// turns local admission off, so that every Admit is a round trip; a TTL
// longer than MaxLocalAdmissionTTL is cut to it. The default is
// DefaultLocalAdmissionTTL. With it on, the store subscribes to
// the channel on which the replicas announce the gates that stop being
// plain. Every replica announces, local admission on or off, so replicas
// with different settings may share a Redis; the ACL user needs PUBLISH
// (and, with local admission on, SUBSCRIBE) on the channel <prefix>plain.
// See localAdmission for the guarantees.
func WithLocalAdmission(ttl time.Duration) Option {
	return func(o *options) { o.localTTL = min(max(ttl, 0), MaxLocalAdmissionTTL) }
}

// WithKeyPrefix replaces DefaultKeyPrefix, for instance to share one Redis
// database between deployments. The prefix must not contain '{' or '}'
// (New reports an error).
func WithKeyPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// WithTimeouts sets the dial timeout and the timeout of each socket read,
// write and pool wait, for every topology; zero or negative values keep
// DefaultDialTimeout and DefaultIOTimeout (or what the URL sets).
func WithTimeouts(dial, io time.Duration) Option {
	return func(o *options) {
		if dial > 0 {
			o.dial = dial
		}
		if io > 0 {
			o.io = io
		}
	}
}

// WithRedisOptions lets fn adjust the single-server client options after
// they were parsed from the URL and the package defaults were applied.
// New and Open with a URL only; ignored by NewFromClient.
func WithRedisOptions(fn func(*redis.Options)) Option {
	return func(o *options) { o.tune = append(o.tune, fn) }
}

// WithClusterOptions lets fn adjust the cluster client options after the
// package defaults were applied. Open with ClusterAddrs only.
func WithClusterOptions(fn func(*redis.ClusterOptions)) Option {
	return func(o *options) { o.tuneCluster = append(o.tuneCluster, fn) }
}

// WithFailoverOptions lets fn adjust the Sentinel (failover) client options
// after the package defaults were applied. Open with SentinelAddrs only.
func WithFailoverOptions(fn func(*redis.FailoverOptions)) Option {
	return func(o *options) { o.tuneSent = append(o.tuneSent, fn) }
}

// Topology names how a Store reaches Redis.
type Topology string

// Topologies.
const (
	// Single is one server (or a proxy or managed endpoint that acts as
	// one): Config.URL.
	Single Topology = "single"
	// Cluster is Redis Cluster, reached from seed nodes (managed services
	// in cluster mode are this): Config.ClusterAddrs.
	Cluster Topology = "cluster"
	// Sentinel is a master and replicas watched by Redis Sentinel:
	// Config.SentinelMaster and Config.SentinelAddrs.
	Sentinel Topology = "sentinel"
)

// Config says how to reach Redis. Exactly one topology must be given: URL,
// ClusterAddrs, or SentinelMaster with SentinelAddrs.
type Config struct {
	// URL is a single server: "redis://[user:password@]host:port/db",
	// "rediss://..." for TLS, or "unix:///path". Query parameters such as
	// dial_timeout are honoured.
	URL string
	// ClusterAddrs are host:port seed nodes of a Redis Cluster; the client
	// discovers the others.
	ClusterAddrs []string
	// SentinelMaster is the master's name as the sentinels know it.
	SentinelMaster string
	// SentinelAddrs are host:port addresses of sentinels.
	SentinelAddrs []string
	// DB is the database number for Sentinel (a URL carries its own; a
	// cluster has only database 0).
	DB int
	// Username and Password authenticate to Redis (ACL user, or only a
	// password for requirepass). With a URL they must not also be in it.
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// themselves, when they require it.
	SentinelUsername, SentinelPassword string
	// TLS, when not nil, makes every connection (servers and sentinels)
	// use TLS with this configuration. A rediss:// URL uses TLS with the
	// system roots when TLS is nil. An empty ServerName is taken from each
	// address dialled.
	TLS *tls.Config
}

// Topology returns the topology the configuration selects, or an error
// when it selects none or several.
func (c Config) Topology() (Topology, error) {
	var got []Topology
	if c.URL != "" {
		got = append(got, Single)
	}
	if len(c.ClusterAddrs) > 0 {
		got = append(got, Cluster)
	}
	if c.SentinelMaster != "" || len(c.SentinelAddrs) > 0 {
		got = append(got, Sentinel)
		if c.SentinelMaster == "" || len(c.SentinelAddrs) == 0 {
			return "", errors.New("redisstore: Sentinel needs a master name and at least one sentinel address")
		}
	}
	switch len(got) {
	case 0:
		return "", errors.New("redisstore: no Redis given (a URL, cluster seeds or sentinels)")
	case 1:
		return got[0], nil
	}
	return "", fmt.Errorf("redisstore: give one Redis topology, not %d (%v)", len(got), got)
}

// Store is a store.Store kept in Redis. Create it with New, Open or
// NewFromClient.
type Store struct {
	client    redis.UniversalClient
	topology  Topology
	keys      keys
	ticketTTL int64 // µs
	maxGates  int64 // gates per tenant
	marginMS  int64
	tolUS     int64 // store.QuotaWindowTolerance, µs
	idPrefix  string
	nextID    atomic.Uint64
	closed    atomic.Bool
	local     *localAdmission // nil: off
	untracked func(tenant string)
	listed    memberCache // index members of recent listings
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Verifier = (*Store)(nil)
	_ store.Pinger   = (*Store)(nil)
)

// New connects to the single Redis server at rawURL; it is Open with
// Config{URL: rawURL}.
func New(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	return Open(ctx, Config{URL: rawURL}, opts...)
}

// Open returns a Store on the topology cfg gives, with the go-redis client
// made for it: a single-server client, a cluster client, or a Sentinel
// (failover) client. It fails only on an invalid configuration: a Redis
// that is down, or misconfigured, is reported by the operations and by
// Verify, never by Open. ctx bounds a best-effort script preload (at most
// 250 ms; without it the first call of each script costs one more round
// trip). Errors never hold a password.
func Open(ctx context.Context, cfg Config, opts ...Option) (*Store, error) {
	topo, err := cfg.Topology()
	if err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	var client redis.UniversalClient
	switch topo {
	case Single:
		ro, err := singleOptions(cfg, o)
		if err != nil {
			return nil, err
		}
		client = redis.NewClient(ro)
	case Cluster:
		co, err := clusterOptions(cfg, o)
		if err != nil {
			return nil, err
		}
		client = redis.NewClusterClient(co)
	case Sentinel:
		fo, err := failoverOptions(cfg, o)
		if err != nil {
			return nil, err
		}
		client = redis.NewFailoverClient(fo)
	}
	s := newStore(client, topo, o)
	s.preload(ctx)
	return s, nil
}

// NewFromClient returns a Store using client, which it owns from then on:
// Close closes it. Set short timeouts and ContextTimeoutEnabled on the
// client; Open shows the defaults. Keys of one tenant share a hash tag, so
// a *redis.ClusterClient works too (and Verify then checks every master).
func NewFromClient(client redis.UniversalClient, opts ...Option) (*Store, error) {
	o := buildOptions(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	topo := Single
	if _, ok := client.(*redis.ClusterClient); ok {
		topo = Cluster
	}
	return newStore(client, topo, o), nil
}

func buildOptions(opts []Option) options {
	o := options{ticketTTL: store.DefaultTicketTTL, prefix: DefaultKeyPrefix, maxGates: DefaultMaxGatesPerTenant, localTTL: DefaultLocalAdmissionTTL}
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

// singleOptions parses the URL and applies cfg's credentials and TLS and
// the package defaults.
func singleOptions(cfg Config, o options) (*redis.Options, error) {
	ro, err := redis.ParseURL(cfg.URL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("redisstore: invalid Redis URL %s: %w", Redact(cfg.URL), err)
	}
	if cfg.Username != "" || cfg.Password != "" {
		if ro.Username != "" || ro.Password != "" {
			return nil, errors.New("redisstore: credentials both in the Redis URL and given apart: give them once")
		}
		ro.Username, ro.Password = cfg.Username, cfg.Password
	}
	if cfg.TLS != nil {
		ro.TLSConfig = cfg.TLS.Clone()
	}
	t := timeouts{&ro.DialTimeout, &ro.ReadTimeout, &ro.WriteTimeout, &ro.PoolTimeout}
	t.apply(o)
	if ro.MaxRetries == 0 {
		ro.MaxRetries = 1
	}
	if ro.MinRetryBackoff == 0 {
		ro.MinRetryBackoff = minRetryBackoff
	}
	if ro.MaxRetryBackoff == 0 {
		ro.MaxRetryBackoff = maxRetryBackoff
	}
	if ro.DialerRetries == 0 {
		ro.DialerRetries = 1
	}
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	if ro.MaintNotificationsConfig == nil {
		ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	for _, fn := range o.tune {
		fn(ro)
	}
	return ro, nil
}

// clusterOptions builds the cluster client's options.
func clusterOptions(cfg Config, o options) (*redis.ClusterOptions, error) {
	if err := checkAddrs("cluster seed", cfg.ClusterAddrs); err != nil {
		return nil, err
	}
	co := &redis.ClusterOptions{
		Addrs:    append([]string(nil), cfg.ClusterAddrs...),
		Username: cfg.Username, Password: cfg.Password,
		// Redirects (MOVED, ASK) and retries on another node are how the
		// client follows a failover; the Fallback's bound caps the time.
		MaxRedirects: 3,
		// The store sends single-slot commands only. Routing policies would
		// look up each command's policy with COMMAND, and a user without
		// +command (the ACL docs/operations.md gives) would be refused on
		// every call, on every master: one more round trip each.
		DisableRoutingPolicies: true,
		MinRetryBackoff:        minRetryBackoff,
		MaxRetryBackoff:        maxRetryBackoff,
		DialerRetries:          1,
		ContextTimeoutEnabled:  true,
		DisableIdentity:        true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}
	if cfg.TLS != nil {
		co.TLSConfig = cfg.TLS.Clone()
	}
	t := timeouts{&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout, &co.PoolTimeout}
	t.apply(o)
	for _, fn := range o.tuneCluster {
		fn(co)
	}
	return co, nil
}

// failoverOptions builds the Sentinel client's options.
func failoverOptions(cfg Config, o options) (*redis.FailoverOptions, error) {
	if err := checkAddrs("sentinel", cfg.SentinelAddrs); err != nil {
		return nil, err
	}
	fo := &redis.FailoverOptions{
		MasterName:       cfg.SentinelMaster,
		SentinelAddrs:    append([]string(nil), cfg.SentinelAddrs...),
		SentinelUsername: cfg.SentinelUsername, SentinelPassword: cfg.SentinelPassword,
		Username: cfg.Username, Password: cfg.Password,
		DB:                    cfg.DB,
		MaxRetries:            1,
		MinRetryBackoff:       minRetryBackoff,
		MaxRetryBackoff:       maxRetryBackoff,
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
	if cfg.TLS != nil {
		fo.TLSConfig = cfg.TLS.Clone()
	}
	t := timeouts{&fo.DialTimeout, &fo.ReadTimeout, &fo.WriteTimeout, &fo.PoolTimeout}
	t.apply(o)
	for _, fn := range o.tuneSent {
		fn(fo)
	}
	return fo, nil
}

// Retry backoffs of the clients: short, so that a retry fits in the
// Fallback's bound.
const (
	minRetryBackoff = 8 * time.Millisecond
	maxRetryBackoff = 64 * time.Millisecond
)

// timeouts points at a client's dial, read, write and pool timeouts.
type timeouts struct{ dial, read, write, pool *time.Duration }

// apply sets WithTimeouts' values, and the package defaults where neither
// they nor the URL set one, so that an outage fails calls quickly instead
// of hanging them.
func (t timeouts) apply(o options) {
	set := func(p *time.Duration, opt, def time.Duration) {
		switch {
		case opt > 0:
			*p = opt
		case *p == 0:
			*p = def
		}
	}
	set(t.dial, o.dial, DefaultDialTimeout)
	set(t.read, o.io, DefaultIOTimeout)
	set(t.write, o.io, DefaultIOTimeout)
	set(t.pool, o.io, DefaultIOTimeout)
}

// checkAddrs checks that addrs are host:port pairs.
func checkAddrs(what string, addrs []string) error {
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("redisstore: %s address %q is not host:port", what, a)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("redisstore: %s address %q: bad port", what, a)
		}
	}
	return nil
}

func newStore(client redis.UniversalClient, topo Topology, o options) *Store {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	s := &Store{
		client:    client,
		topology:  topo,
		keys:      keys{prefix: o.prefix},
		ticketTTL: int64(o.ticketTTL / time.Microsecond),
		maxGates:  int64(o.maxGates),
		marginMS:  int64(keyMargin / time.Millisecond),
		tolUS:     int64(store.QuotaWindowTolerance / time.Microsecond),
		idPrefix:  "r" + hex.EncodeToString(b[:]) + ".",
		untracked: o.untracked,
	}
	if o.localTTL > 0 {
		s.local = newLocalAdmission(s, o.localTTL)
	}
	return s
}

// AddHook adds a go-redis hook (instrumentation: it sees every command
// and pipeline the store sends) to the store's client.
func (s *Store) AddHook(h redis.Hook) { s.client.AddHook(h) }

// Topology returns how the store reaches Redis.
func (s *Store) Topology() Topology { return s.topology }

func (s *Store) preload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, preloadTimeout)
	defer cancel()
	for _, sc := range scripts {
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

// wrap turns a client error into an *Error that names its cause and wraps
// store.ErrUnavailable, or into one wrapping store.ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		return fmt.Errorf("redisstore: %s: %w", op, store.ErrClosed)
	}
	return newError(op, err)
}

// flag is a boolean script argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// breakerArgs are the script arguments of a breaker configuration:
// enabled, window s, min calls, failure ratio, open for µs, max open µs.
func breakerArgs(c store.BreakerConfig) []any {
	n := c.Normalized()
	return []any{
		flag(c.Enabled), n.WindowSeconds(), n.MinCalls, strconv.FormatFloat(n.FailureRatio, 'g', -1, 64),
		int64(n.OpenFor / time.Microsecond), int64(n.MaxOpen / time.Microsecond),
	}
}

// Admit implements store.Store in one script call, or none on a plain gate
// (localAdmission). The ticket id is made up beforehand and used only when
// the script registers the attempt (the gate has a known quota, or the
// attempt goes as the probe); otherwise the Ticket is empty.
//
// The script call is in admitRemote, not inlined: its arguments take a
// large frame, which a call admitted locally (most calls, on plain gates)
// would otherwise carry too, deep in Execute's stack. With it, that stack
// grew past the serving goroutine's 8 KiB at every fresh goroutine, and
// the copy cost about 1.6 µs per call (BenchmarkExecuteStore/redis; see
// engine's callState.run on the stack budget).
func (s *Store) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	g := req.Gate
	stateKey, budgetKey := s.keys.state(g), s.keys.budget(g.Tenant)
	var seq uint64
	if s.local != nil {
		if adm, ok := s.local.admit(&req, stateKey, budgetKey); ok {
			return adm, nil
		}
		seq = s.local.mark()
	}
	return s.admitRemote(ctx, &req, stateKey, budgetKey, seq)
}

// admitRemote runs admitScript for req (see Admit); seq is local
// admission's mark (0 without it).
//
//go:noinline
func (s *Store) admitRemote(ctx context.Context, req *store.AdmitRequest, stateKey, budgetKey string, seq uint64) (store.Admission, error) {
	now := micros(req.Now)
	window := int64(0)
	if req.FirstAttempt && !req.Budget.Unlimited() {
		window = req.Budget.WindowSeconds()
	}
	g := req.Gate
	id := s.idPrefix + strconv.FormatUint(s.nextID.Add(1), 36)
	res, err := s.run(ctx, stateKey, "", admitPending, admitScript,
		[]string{
			s.keys.gate(g), s.keys.inflight(g), s.keys.pace(g.Tenant, req.PaceHost), budgetKey,
			s.keys.quota(g), stateKey, s.keys.index(g.Tenant), s.keys.order(g),
		},
		now, id, s.ticketTTL,
		int64(req.Pace.Interval()/time.Microsecond), req.Pace.BurstOrOne(),
		int64(max(req.PaceMaxWait, 0)/time.Microsecond),
		window, s.marginMS,
		flag(req.Learning.Enabled), int64(req.Learning.Expiry()/time.Microsecond),
		flag(req.Breaker.Enabled), req.Breaker.WindowSeconds(),
		int64(HeldPoll/time.Microsecond), s.maxGates, s.keys.member(g),
		flag(req.Learning.FirstWindow()), int64(req.Learning.Hold()/time.Microsecond),
		req.Order.Broker, micros(req.Order.Arrival), orderQueue(&req.Order),
	).Int64Slice()
	if err != nil {
		return store.Admission{}, s.wrap("admit", err)
	}
	r, err := decodeAdmit(res)
	if err != nil {
		return store.Admission{}, err
	}
	if r.untracked {
		s.noteUntracked(g.Tenant)
	}
	if s.local != nil {
		s.local.remember(req, stateKey, r.kind == admitAdmitted && r.plain, r.epoch, seq)
	}
	wait := time.Duration(r.wait) * time.Microsecond
	switch r.kind {
	case admitAdmitted:
		adm := store.Admission{PaceWait: wait, Probe: r.probe, Ticket: store.Ticket{Epoch: r.epoch}}
		if r.registered {
			adm.Ticket.ID = id
		}
		return adm, nil
	case admitGateClosed:
		return store.Admission{GateClosedUntil: timeOf(r.until)}, nil
	case admitBreakerOpen:
		return store.Admission{BreakerOpenUntil: timeOf(r.until)}, nil
	case admitHeld:
		return store.Admission{Held: true, HeldFor: wait}, nil
	case admitPaceDenied:
		return store.Admission{PaceDenied: true, PaceWait: wait}, nil
	}
	return store.Admission{}, unexpected("admit", res) // decodeAdmit knows every kind
}

// orderQueue is the replica's queue of o as admitScript reads it (ARGV[20]):
// "n,a1,d1,a2,d2,..." in µs (a zero deadline as 0), "" for none.
func orderQueue(o *store.Order) string {
	if o.Broker == "" || o.QueueLen == 0 || len(o.Queue) == 0 {
		return ""
	}
	b := make([]byte, 0, 8+34*len(o.Queue))
	b = strconv.AppendInt(b, int64(max(o.QueueLen, len(o.Queue))), 10)
	for _, w := range o.Queue[:min(len(o.Queue), store.MaxOrderQueue)] {
		b = append(b, ',')
		b = strconv.AppendInt(b, micros(w.Arrival), 10)
		b = append(b, ',')
		if w.Deadline.IsZero() {
			b = append(b, '0')
		} else {
			b = strconv.AppendInt(b, micros(w.Deadline), 10)
		}
	}
	return string(b)
}

// admitPending appends admitScript's optional gate payload.
func admitPending(args []any, g *gatePending, _ *budgetPending) []any {
	if g == nil {
		return args
	}
	return gatePayload(args, g)
}

// completePending appends completeScript's optional gate and budget
// payloads.
func completePending(args []any, g *gatePending, b *budgetPending) []any {
	if g == nil {
		args = append(args, "0")
	} else {
		args = gatePayload(append(args, "1"), g)
	}
	if b == nil {
		return append(args, "0")
	}
	return budgetPayload(append(args, "1"), b)
}

// Complete implements store.Store in one script call.
func (s *Store) Complete(ctx context.Context, req store.CompleteRequest) (store.CompleteResult, error) {
	return s.complete(ctx, "complete", settlement{
		gate: req.Gate, ticket: req.Ticket, obs: req.Obs, result: req.Result, learning: req.Learning, breaker: req.Breaker,
		spend: req.SpendRetry, budget: req.Budget, now: micros(req.Now), maxGate: req.MaxGate,
	})
}

// Observe implements store.Store in one script call.
func (s *Store) Observe(ctx context.Context, req store.ObserveRequest) (store.GateStatus, error) {
	r, err := s.complete(ctx, "observe", settlement{
		gate: req.Gate, obs: req.Obs, result: req.Result, learning: req.Learning, breaker: req.Breaker, observed: true,
		now: micros(req.Now), maxGate: req.MaxGate,
	})
	return store.GateStatus{ClosedUntil: r.GateClosedUntil, BreakerOpenUntil: r.BreakerOpenUntil, BreakerChange: r.BreakerChange}, err
}

// settlement is what completeScript records: the end of an attempt, or
// (observed) an observation without one.
type settlement struct {
	gate     store.GateKey
	ticket   store.Ticket
	obs      store.Observation
	result   store.Result
	learning store.LearningConfig
	breaker  store.BreakerConfig
	observed bool
	spend    bool
	budget   store.BudgetConfig
	now      int64 // µs
	maxGate  time.Duration
}

func (s *Store) complete(ctx context.Context, op string, st settlement) (store.CompleteResult, error) {
	now, obs, g := st.now, st.obs, st.gate
	limit := micros(store.GateBound(time.UnixMicro(now), st.maxGate))
	closeUntil, hasQuota, reset := int64(0), "0", int64(0)
	if !obs.CloseUntil.IsZero() {
		closeUntil = min(obs.CloseUntil.UnixMicro(), limit)
	}
	if obs.HasQuota && !obs.Reset.IsZero() {
		hasQuota, reset = "1", min(obs.Reset.UnixMicro(), limit)
	}
	spendArg, window := "0", int64(0)
	if st.spend {
		spendArg = "1"
		if !st.budget.Unlimited() {
			window = st.budget.WindowSeconds()
		}
	}
	args := []any{
		now, st.ticket.ID, closeUntil, hasQuota, min(max(obs.Remaining, 0), maxRemaining), reset,
		spendArg, window,
		strconv.FormatFloat(st.budget.RatioOrZero(), 'g', -1, 64),
		strconv.FormatFloat(st.budget.FloorTotal(), 'g', -1, 64),
		s.marginMS, s.tolUS,
		st.ticket.Epoch, int(st.result), flag(st.observed),
	}
	args = append(args, breakerArgs(st.breaker)...)
	stateKey, budgetKey := s.keys.state(g), ""
	if st.spend {
		budgetKey = s.keys.budget(g.Tenant)
	}
	if s.local != nil {
		s.local.forget(stateKey) // this replica is about to change the gate
	}
	// Every replica announces the gates it makes non-plain, local
	// admission on or off: another replica may admit on them locally.
	args = append(args, limit, s.maxGates, s.keys.member(g), int64(st.learning.Expiry()/time.Microsecond), s.keys.channel())
	res, err := s.run(ctx, stateKey, budgetKey, completePending, completeScript,
		[]string{s.keys.gate(g), s.keys.inflight(g), s.keys.budget(g.Tenant), s.keys.quota(g), stateKey, s.keys.index(g.Tenant)},
		args...,
	).Int64Slice()
	if err != nil {
		return store.CompleteResult{}, s.wrap(op, err)
	}
	r, err := decodeComplete(op, res)
	if err != nil {
		return store.CompleteResult{}, err
	}
	if r.untracked {
		s.noteUntracked(g.Tenant)
	}
	return store.CompleteResult{
		RetryAllowed: r.allowed, GateClosedUntil: timeOf(r.closedUntil), BreakerOpenUntil: timeOf(r.breakerUntil),
		BreakerChange: r.change,
	}, nil
}

// GateState implements store.Store in one (read-only) script call.
func (s *Store) GateState(ctx context.Context, gate store.GateKey, now time.Time) (store.GateStatus, error) {
	res, err := stateScript.Run(ctx, s.client,
		[]string{s.keys.gate(gate), s.keys.inflight(gate), s.keys.quota(gate), s.keys.state(gate)}, micros(now)).Int64Slice()
	if err != nil {
		return store.GateStatus{}, s.wrap("gate state", err)
	}
	if len(res) != 2 {
		return store.GateStatus{}, fmt.Errorf("redisstore: gate state: %w: unexpected reply", store.ErrUnavailable)
	}
	return store.GateStatus{ClosedUntil: timeOf(res[0]), BreakerOpenUntil: timeOf(res[1])}, nil
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
	if s.local != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultIOTimeout)
		s.local.close(ctx)
		cancel()
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}
