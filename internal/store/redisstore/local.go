package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Local admission defaults.
const (
	// DefaultLocalAdmissionTTL is how long a replica admits attempts on a
	// plain gate without asking Redis, unless told otherwise sooner; see
	// WithLocalAdmission.
	DefaultLocalAdmissionTTL = 250 * time.Millisecond
	// MaxLocalAdmissionTTL bounds WithLocalAdmission: should an
	// announcement that a gate closed be lost without the subscription
	// breaking, a replica goes on admitting on that gate at most this long.
	MaxLocalAdmissionTTL = 10 * time.Second
	// localFlushEvery is how soon the counts of locally admitted attempts
	// reach Redis (at most; at once when another replica changes the gate).
	localFlushEvery = 10 * time.Millisecond
	// maxLocalGates bounds the plain gates a replica remembers.
	maxLocalGates = 1 << 16
	// maxFlushBatch bounds the scripts of one flush pipeline.
	maxFlushBatch = 256
	// subscriberIdle is how long the invalidation subscription may stay
	// silent before it is pinged; after three such silences it is taken
	// for dead (local admission stops until it is confirmed again: by a
	// new subscription, or by an answer on the same connection).
	subscriberIdle = time.Second
)

// localAdmission admits attempts on plain gates without a round trip.
//
// A gate is plain when admitScript would admit the next attempt the same
// way, changing nothing but counts: no known quota, no pacing, nothing to
// register in flight, a closed breaker, and (with learning on) a learning
// epoch that learned nothing yet and was not ended by a refusal. When
// admitScript reports a plain gate, the replica remembers it for the TTL
// (by the broker's clock) and admits the following attempts on it locally,
// counting what admitScript would have counted: the attempts in the
// learning epoch, the learned state's idle expiry, the breaker's calls per
// second, and the tenant's first attempts for the retry budget. Those
// counts reach Redis within localFlushEvery (flushGateScript,
// flushBudgetScript), and always before any script of this replica on the
// same gate or budget (in the same pipeline), so that one replica's
// operations see every attempt it admitted, as without local admission.
//
// Every replica learns at once that a gate stopped being plain: the
// script that closes it, records its first quota, ends its learning epoch
// or changes its breaker publishes the gate's state key on the store's
// channel, and every replica subscribes to it and forgets the gate (and
// writes its counts for it without waiting). A replica admits locally only
// while its subscription is confirmed; when it breaks, the replica forgets
// every gate until it is confirmed again, and the TTL bounds how long a
// lost message could go unnoticed. Another replica's counts may thus reach
// Redis up to localFlushEvery late (a retry budget or a breaker ratio
// reads them then), and an attempt may be admitted locally while the
// message that a gate closed elsewhere is on its way, as it would be had
// it been sent a moment earlier.
type localAdmission struct {
	s       *Store
	ttl     time.Duration
	channel string

	mu      sync.Mutex
	live    bool   // the subscription is confirmed
	seq     uint64 // bumped by every invalidation and every forget-all
	plain   map[string]*plainGate
	gates   map[string][]*gatePending // by state key
	budgets map[string][]*budgetPending
	sending map[string]chan struct{} // keys whose counts are being written
	armed   bool                     // a flush is scheduled

	wake    chan struct{}
	stop    context.CancelFunc
	stopped sync.WaitGroup
	ps      atomic.Pointer[redis.PubSub]

	local, flushed, dropped, subscribed atomic.Int64
}

// admitSig is what an attempt's configuration tells admitScript: a plain
// gate is admitted locally only for attempts configured the same way.
type admitSig struct {
	learnExpiry int64 // µs; 0 = learning off
	brkWindow   int64 // s; 0 = breaker off
	firstWindow bool  // the first-window rule applies
}

func sigOf(req *store.AdmitRequest) admitSig {
	var sg admitSig
	if req.Learning.Enabled {
		sg.learnExpiry = int64(req.Learning.Expiry() / time.Microsecond)
		sg.firstWindow = req.Learning.FirstWindow()
	}
	if req.Breaker.Enabled {
		sg.brkWindow = req.Breaker.WindowSeconds()
	}
	return sg
}

// plainGate is a gate admitScript reported plain.
type plainGate struct {
	until time.Time // by the broker's clock
	epoch int64
	sig   admitSig
}

// gatePending is what locally admitted attempts did to one gate in one
// learning epoch.
type gatePending struct {
	gate  store.GateKey
	sig   admitSig
	epoch int64
	n     int64
	last  time.Time
	calls map[int64]int64 // Unix second -> calls, breaker on
}

// budgetPending is the first attempts locally admitted for one tenant's
// budget with one window.
type budgetPending struct {
	window int64 // s
	last   time.Time
	q      map[int64]int64 // Unix second -> first attempts
}

func newLocalAdmission(s *Store, ttl time.Duration) *localAdmission {
	l := &localAdmission{
		s: s, ttl: ttl, channel: s.keys.channel(),
		plain: map[string]*plainGate{}, gates: map[string][]*gatePending{}, budgets: map[string][]*budgetPending{},
		sending: map[string]chan struct{}{}, wake: make(chan struct{}, 1),
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	l.stopped.Add(2)
	go l.subscribe(ctx)
	go l.flusher(ctx)
	return l
}

// admit admits req locally when its gate is plain; ok is false when it
// must go to Redis.
func (l *localAdmission) admit(req *store.AdmitRequest, stateKey, budgetKey string) (store.Admission, bool) {
	if req.Pace.Interval() > 0 {
		return store.Admission{}, false
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	sg := sigOf(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.plain[stateKey]
	if e == nil || !l.live || e.sig != sg || !now.Before(e.until) {
		return store.Admission{}, false
	}
	sec := now.Unix()
	ps := l.gates[stateKey]
	var p *gatePending
	if n := len(ps); n > 0 && ps[n-1].epoch == e.epoch && ps[n-1].sig == sg {
		p = ps[n-1]
	} else {
		p = &gatePending{gate: req.Gate, sig: sg, epoch: e.epoch}
		if sg.brkWindow > 0 {
			p.calls = map[int64]int64{}
		}
		l.gates[stateKey] = append(ps, p)
	}
	if sg.learnExpiry > 0 {
		p.n++
	}
	if now.After(p.last) {
		p.last = now
	}
	if p.calls != nil {
		p.calls[sec]++
	}
	if req.FirstAttempt && !req.Budget.Unlimited() {
		w := req.Budget.WindowSeconds()
		bs := l.budgets[budgetKey]
		var b *budgetPending
		if n := len(bs); n > 0 && bs[n-1].window == w {
			b = bs[n-1]
		} else {
			b = &budgetPending{window: w, q: map[int64]int64{}}
			l.budgets[budgetKey] = append(bs, b)
		}
		b.q[sec]++
		if now.After(b.last) {
			b.last = now
		}
	}
	l.local.Add(1)
	l.arm()
	return store.Admission{Ticket: store.Ticket{Epoch: e.epoch}}, true
}

// mark returns the invalidation sequence number, taken before a script
// whose answer may be remembered.
func (l *localAdmission) mark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// remember records admitScript's answer on a gate: plain (with its
// epoch), or not. A plain answer is kept only when nothing was
// invalidated since seq, so that no message that arrived while the script
// ran is overtaken.
func (l *localAdmission) remember(req *store.AdmitRequest, stateKey string, plain bool, epoch int64, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !plain || !l.live || l.seq != seq {
		delete(l.plain, stateKey)
		return
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	if _, ok := l.plain[stateKey]; !ok && len(l.plain) >= maxLocalGates {
		for k, e := range l.plain {
			if !now.Before(e.until) {
				delete(l.plain, k)
			}
		}
		if len(l.plain) >= maxLocalGates {
			return
		}
	}
	l.plain[stateKey] = &plainGate{until: now.Add(l.ttl), epoch: epoch, sig: sigOf(req)}
}

// forget drops the gate of stateKey (this replica is about to change it,
// or was told another did).
func (l *localAdmission) forget(stateKey string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.plain, stateKey)
	l.seq++
}

// invalidated handles a message on the channel: the gate of stateKey
// stopped being plain; its counts are written without waiting.
func (l *localAdmission) invalidated(stateKey string) {
	l.mu.Lock()
	delete(l.plain, stateKey)
	l.seq++
	_, pending := l.gates[stateKey]
	l.mu.Unlock()
	if pending {
		l.kick()
	}
}

// setLive records whether the subscription is confirmed; either way every
// remembered gate is forgotten (messages may have been missed).
func (l *localAdmission) setLive(live bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = live
	l.forgetAllLocked()
}

func (l *localAdmission) forgetAllLocked() {
	clear(l.plain)
	l.seq++
}

// arm schedules a flush within localFlushEvery. l.mu is held.
func (l *localAdmission) arm() {
	if l.armed {
		return
	}
	l.armed = true
	time.AfterFunc(localFlushEvery, l.kick)
}

func (l *localAdmission) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// taken is pending counts taken for writing, and the channel closed once
// they are written (or lost).
type taken struct {
	gates   []*gatePending
	budgets []*budgetPending
	budKey  []string
	done    chan struct{}
	keys    []string
}

func (t *taken) empty() bool { return t == nil || len(t.gates)+len(t.budgets) == 0 }

// takeLocked takes the pending counts of the given state and budget keys
// (all of them when both are empty) and marks them being sent. l.mu is
// held.
func (l *localAdmission) takeLocked(stateKey, budgetKey string, all bool) *taken {
	t := &taken{done: make(chan struct{})}
	takeGate := func(k string) {
		if ps, ok := l.gates[k]; ok {
			t.gates = append(t.gates, ps...)
			delete(l.gates, k)
			l.sending[k] = t.done
			t.keys = append(t.keys, k)
		}
	}
	takeBudget := func(k string) {
		if bs, ok := l.budgets[k]; ok {
			for _, b := range bs {
				t.budgets = append(t.budgets, b)
				t.budKey = append(t.budKey, k)
			}
			delete(l.budgets, k)
			l.sending[k] = t.done
			t.keys = append(t.keys, k)
		}
	}
	if all {
		for k := range l.gates {
			takeGate(k)
		}
		for k := range l.budgets {
			takeBudget(k)
		}
		return t
	}
	takeGate(stateKey)
	if budgetKey != "" {
		takeBudget(budgetKey)
	}
	return t
}

// release marks t's counts written (or lost: ok false).
func (l *localAdmission) release(t *taken, ok bool) {
	if t.empty() {
		return
	}
	l.mu.Lock()
	for _, k := range t.keys {
		if l.sending[k] == t.done {
			delete(l.sending, k)
		}
	}
	if !ok {
		l.forgetAllLocked() // the next attempts go to Redis and meet the trouble
	}
	l.mu.Unlock()
	if ok {
		l.flushed.Add(int64(len(t.gates) + len(t.budgets)))
	} else {
		l.dropped.Add(int64(len(t.gates) + len(t.budgets)))
	}
	close(t.done)
}

// settle takes the pending counts of a gate and its tenant's budget, for
// a script of this replica on them: it first waits for counts of those
// keys already being written (bounded by ctx), so that the script sees
// every attempt admitted before it.
func (l *localAdmission) settle(ctx context.Context, stateKey, budgetKey string) (*taken, error) {
	for {
		l.mu.Lock()
		wait := l.sending[stateKey]
		if wait == nil && budgetKey != "" {
			wait = l.sending[budgetKey]
		}
		if wait == nil {
			t := l.takeLocked(stateKey, budgetKey, false)
			l.mu.Unlock()
			return t, nil
		}
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// flush writes every pending count now.
func (l *localAdmission) flush(ctx context.Context) error {
	l.mu.Lock()
	l.armed = false
	t := l.takeLocked("", "", true)
	l.mu.Unlock()
	if t.empty() {
		l.release(t, true)
		return nil
	}
	err := l.s.pipeline(ctx, l.s.flushCalls(t))
	l.release(t, err == nil)
	return err
}

func (l *localAdmission) flusher(ctx context.Context) {
	defer l.stopped.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		fctx, cancel := context.WithTimeout(ctx, 2*DefaultIOTimeout)
		_ = l.flush(fctx) // a failure forgets every gate: the next Admit meets it
		cancel()
	}
}

// subscribe keeps the invalidation subscription and marks it live while
// it is confirmed.
func (l *localAdmission) subscribe(ctx context.Context) {
	defer l.stopped.Done()
	ps := l.s.client.Subscribe(ctx, l.channel)
	l.ps.Store(ps)
	defer func() { _ = ps.Close() }()
	silent := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, subscriberIdle)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if silent++; silent == 3 {
					l.setLive(false)
				}
				_ = ps.Ping(ctx)
				continue
			}
			l.setLive(false) // go-redis reconnects and subscribes again on the next receive
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if silent >= 3 {
			// An answer on the same connection after a silence: the
			// subscription held (a new connection subscribes again, and
			// its confirmation comes first), nothing it carried was lost.
			l.setLive(true)
		}
		silent = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == l.channel {
				l.setLive(true)
				l.subscribed.Add(1)
			}
		case *redis.Message:
			l.invalidated(m.Payload)
		}
	}
}

// close stops the subscription and writes the pending counts (bounded by
// ctx).
func (l *localAdmission) close(ctx context.Context) {
	l.stop()
	if ps := l.ps.Load(); ps != nil {
		_ = ps.Close() // ends a receive in progress
	}
	l.stopped.Wait()
	l.setLive(false)
	_ = l.flush(ctx)
}

// gatePayload appends p as a gate payload (see luaPending) to args.
func gatePayload(args []any, p *gatePending) []any {
	args = append(args, p.epoch, p.n, p.sig.learnExpiry, p.sig.brkWindow, micros(p.last), len(p.calls))
	for sec, n := range p.calls {
		args = append(args, sec, n)
	}
	return args
}

// budgetPayload appends b as a budget payload (see luaPending) to args.
func budgetPayload(args []any, b *budgetPending) []any {
	args = append(args, b.window, micros(b.last), len(b.q))
	for sec, n := range b.q {
		args = append(args, sec, n)
	}
	return args
}

// scriptCall is one script run of a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// flushCalls are the flush scripts that write t's counts.
func (s *Store) flushCalls(t *taken) []scriptCall {
	var calls []scriptCall
	for _, p := range t.gates {
		calls = append(calls, scriptCall{
			flushGateScript,
			[]string{s.keys.state(p.gate), s.keys.index(p.gate.Tenant)},
			gatePayload([]any{s.marginMS, s.maxGates, s.keys.member(p.gate)}, p),
		})
	}
	for i, b := range t.budgets {
		calls = append(calls, scriptCall{flushBudgetScript, []string{t.budKey[i]}, budgetPayload([]any{s.marginMS}, b)})
	}
	return calls
}

// pipeline runs calls in one round trip per batch of maxFlushBatch; their
// order does not matter (each writes its own counts). A script the server
// lost (NOSCRIPT) is run again on its own, with EVAL.
func (s *Store) pipeline(ctx context.Context, calls []scriptCall) error {
	for len(calls) > 0 {
		batch := calls[:min(len(calls), maxFlushBatch)]
		calls = calls[len(batch):]
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, c := range batch {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx)
		for i, cmd := range cmds {
			err := cmd.Err()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				c := batch[i]
				err = c.script.Run(ctx, s.client, c.keys, c.args...).Err()
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// withPending appends a script's payloads of this replica's local
// admissions to its arguments: the gate's (nil: none) and its tenant's
// budget's (nil: none).
type withPending func(args []any, g *gatePending, b *budgetPending) []any

// run runs one script on the gate of stateKey (and the budget of
// budgetKey, "" = none): when local admission is on, with this replica's
// pending counts on them applied first by the same script (pay), so that
// it sees every attempt admitted before it, atomically and in one round
// trip. Counts of more than one epoch (or budget window) are written by
// the flush scripts first.
func (s *Store) run(ctx context.Context, stateKey, budgetKey string, pay withPending, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.local == nil {
		return sc.Run(ctx, s.client, keys, args...)
	}
	t, err := s.local.settle(ctx, stateKey, budgetKey)
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	if t.empty() {
		s.local.release(t, true)
		return sc.Run(ctx, s.client, keys, args...)
	}
	var g *gatePending
	var b *budgetPending
	extra := &taken{}
	if n := len(t.gates); n > 0 {
		g = t.gates[n-1]
		extra.gates = t.gates[:n-1]
	}
	if n := len(t.budgets); n > 0 {
		b = t.budgets[n-1]
		extra.budgets, extra.budKey = t.budgets[:n-1], t.budKey[:n-1]
	}
	if !extra.empty() {
		if err := s.pipeline(ctx, s.flushCalls(extra)); err != nil {
			s.local.release(t, false)
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
	}
	cmd := sc.Run(ctx, s.client, keys, pay(args, g, b)...)
	s.local.release(t, cmd.Err() == nil)
	return cmd
}

// LocalAdmissionStats counts the work of local admission (see
// WithLocalAdmission).
type LocalAdmissionStats struct {
	// Admitted is the attempts admitted without a round trip.
	Admitted int64
	// Flushed is the pending counts written (one per gate and epoch, or
	// tenant budget, per flush).
	Flushed int64
	// Dropped is the pending counts lost to a failed write.
	Dropped int64
	// Subscribed is how many times the subscription was confirmed (more
	// than once after reconnections; each forgot every plain gate).
	Subscribed int64
	// Live reports whether the invalidation subscription is confirmed
	// (without it nothing is admitted locally).
	Live bool
}

// LocalAdmissionStats reports the work of local admission; all zero when
// it is off.
func (s *Store) LocalAdmissionStats() LocalAdmissionStats {
	l := s.local
	if l == nil {
		return LocalAdmissionStats{}
	}
	l.mu.Lock()
	live := l.live
	l.mu.Unlock()
	return LocalAdmissionStats{
		Admitted: l.local.Load(), Flushed: l.flushed.Load(), Dropped: l.dropped.Load(), Subscribed: l.subscribed.Load(), Live: live,
	}
}

// LocalAdmissionTTL returns how long the store admits attempts on a plain
// gate without a round trip; 0 when local admission is off.
func (s *Store) LocalAdmissionTTL() time.Duration {
	if s.local == nil {
		return 0
	}
	return s.local.ttl
}

// LocalAdmissionReady waits until local admission works (its subscription
// is confirmed), bounded by ctx; Open returns before it does, and until
// then every Admit is a round trip. It returns at once when local admission
// is off.
func (s *Store) LocalAdmissionReady(ctx context.Context) error {
	if s.local == nil {
		return nil
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		s.local.mu.Lock()
		live := s.local.live
		s.local.mu.Unlock()
		if live {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisstore: local admission not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Flush writes the counts of the attempts admitted locally and not yet
// written; they are written within 10 ms anyway, and before any other
// operation of this store on the same gate. A no-op when local admission
// is off.
func (s *Store) Flush(ctx context.Context) error {
	if s.local == nil {
		return nil
	}
	if err := s.local.flush(ctx); err != nil {
		return s.wrap("flush", err)
	}
	return nil
}
