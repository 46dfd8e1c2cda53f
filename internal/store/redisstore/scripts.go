package redisstore

import (
	_ "embed" // the scripts, in lua/
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Times in the scripts are Unix microseconds held in Lua numbers (doubles),
// exact up to 2^53 µs (year 2255). Integers are written with
// string.format('%d') so that no value is stored in exponent form.

// luaBudget holds the budget helpers shared by both scripts. A budget hash
// holds, per bucket i = second % window: s<i> = the second counted,
// q<i> = first attempts, r<i> = retries; and kx, until when the hash lives
// (Unix µs, as last set), so that its TTL is raised once a window rather
// than on every count.
//
//go:embed lua/budget.lua
var luaBudget string

// luaGate holds the gate helpers shared by the scripts. A quota hash holds
// r = the known remaining count, w = the window's first reset µs (its
// identity) and u = the window's latest reset µs; see
// store.Observation.HasQuota for the rules, and memstore for the same code
// in Go.
//
//go:embed lua/gate.lua
var luaGate string

// luaState holds the helpers of the gate's state hash: its learned quota,
// its probe slot and its breaker (see doc.go, "Keys", for the fields, and
// memstore for the same rules in Go). Parts that expired read as absent.
//
// A script reads the hash once (state_read), buffers its writes in s.w
// (put) and writes them in one HSET (state_commit), so that an Admit on a
// gate with learning and the breaker on reads and writes the hash once
// each. The hash also caches kx, until when the key lives, and ix, the
// gate's score in the tenant's index, so that neither its TTL nor the
// index is touched on every call.
//
//go:embed lua/state.lua
var luaState string

// luaIndex holds the helpers of the tenant's gate index: a sorted set whose
// members name the tenant's gates (the part of their key names after the
// kind) and whose scores say when each gate frees, in µs. Key names are
// rebuilt from a member inside the scripts, so those keys are not declared
// in KEYS; they share the index's hash tag, hence its slot, so this holds
// on Redis Cluster too.
//
//go:embed lua/index.lua
var luaIndex string

// luaPending applies the counts of attempts a replica admitted locally
// (see localAdmission), as admitScript would have counted them. The
// counts come as payloads in ARGV: the flush scripts take one, and
// admitScript, completeScript and inspectScript take them after their own
// arguments, so that a replica's operation on a gate sees, atomically and
// in order, every attempt it admitted before.
//
// A gate payload is: epoch (0 = none), attempts admitted in it, learning
// idle expiry µs (0 = learning off), breaker window s (0 = breaker off),
// the latest attempt's time µs, k, then k pairs of a Unix second and the
// calls admitted in it. The attempts count in the epoch only while it is
// the gate's current one; the learned state's idle expiry runs from the
// latest attempt; calls of seconds that left the breaker's window are
// dropped.
//
// A budget payload is: window s, the latest attempt's time µs, k, then k
// pairs of a Unix second and the first attempts admitted in it; seconds
// that left the window are dropped.
//
//go:embed lua/pending.lua
var luaPending string

var luaHelpers = luaBudget + luaGate + luaState + luaIndex + luaPending

// luaOrder holds the constants of one arrival order across replicas
// (OrderGrace, OrderPoll).
var luaOrder = "\nlocal ORDER_GRACE, ORDER_POLL = " + strconv.FormatInt(int64(OrderGrace/time.Microsecond), 10) + ", " +
	strconv.FormatInt(int64(OrderPoll/time.Microsecond), 10) + "\n"

// luaFirstWindow holds the first-window constants (store.SlowStartShare,
// store.SlowStartMax), from Go so that both stores use the same.
var luaFirstWindow = "\nlocal SLOW_SHARE, SLOW_MAX = " + strconv.Itoa(store.SlowStartShare) + ", " +
	strconv.Itoa(store.SlowStartMax) + "\n"

// admitKind is what admitScript says of an attempt, the first element of
// its answer. The script names the kinds (ADMITTED, GATE_CLOSED, ...) with
// these values (luaKinds), and decodeAdmit refuses a kind it does not
// know, so the script and the Go code cannot read a kind differently.
type admitKind int64

const (
	admitAdmitted admitKind = iota
	admitGateClosed
	admitPaceDenied
	admitBreakerOpen
	admitHeld
	admitKinds // the number of kinds
)

// luaKinds names admitScript's kinds in Lua, from admitKind.
var luaKinds = fmt.Sprintf("\nlocal ADMITTED, GATE_CLOSED, PACE_DENIED, BREAKER_OPEN, HELD = %d, %d, %d, %d, %d\n",
	admitAdmitted, admitGateClosed, admitPaceDenied, admitBreakerOpen, admitHeld)

// admitScript checks the gate, the breaker, the learned quota and pacing,
// and registers an admitted attempt: in the in-flight set when the gate has
// a known quota (without one, it writes no in-flight key), in the probe
// slot when it goes as the probe. It counts the attempt for the learned
// quota and the breaker.
//
// KEYS: 1 gate, 2 in-flight set, 3 pacing TAT, 4 budget, 5 quota, 6 state,
// 7 index, 8 the replicas' queues (store.Order).
// ARGV: 1 now µs, 2 ticket id, 3 ticket TTL µs, 4 pacing interval µs (0 =
// no pacing), 5 burst, 6 max pacing wait µs, 7 budget window s (0 = do not
// count), 8 key margin ms, 9 learning ('1' or '0'), 10 learning idle
// expiry µs, 11 breaker ('1' or '0'), 12 breaker window s, 13 held poll
// µs, 14 gates per tenant, 15 index member, 16 first window ('1' or '0'),
// 17 scout hold µs, 18 replica (empty: no order), 19 arrival µs, 20 the
// replica's queue (see ret below), then optionally a gate payload of this
// replica's local admissions (see luaPending).
// Returns {kind, until µs, wait µs, registered (1 or 0), probe (1 or 0),
// epoch, plain (1 or 0)}, and for an admitted attempt whether the tenant's
// gate index is full (untracked, 1 or 0): kind (admitKind) ADMITTED (wait =
// pacing wait; plain 1 when the gate is plain, see localAdmission),
// GATE_CLOSED, PACE_DENIED (wait = the wait), BREAKER_OPEN or HELD (wait =
// HeldFor). decodeAdmit reads it.
var admitScript = redis.NewScript(luaHelpers + luaFirstWindow + luaOrder + luaKinds + luaAdmit)

//go:embed lua/admit.lua
var luaAdmit string

// completeScript ends an attempt (or, with an empty ticket id, records a
// bare observation and spends from the budget: it then never writes the
// in-flight set), closes the gate as the observation asks, records its
// quota, spends a retry from the budget, and feeds the result to the probe
// slot, the learned quota and the breaker. Observe runs it too (observed
// '1': no attempt was admitted).
//
// KEYS: 1 gate, 2 in-flight set, 3 budget, 4 quota, 5 state, 6 index.
// ARGV: 1 now µs, 2 ticket id (empty = none), 3 close until µs (0 = none),
// 4 has quota ('1' or '0'), 5 remaining, 6 reset µs, 7 spend retry ('1' or
// '0'), 8 budget window s (0 = unlimited), 9 ratio, 10 floor total,
// 11 key margin ms, 12 quota window tolerance µs, 13 epoch (0 = none),
// 14 result (0 none, 1 accepted, 2 refused, 3 failed), 15 observed ('1' or
// '0'), 16 breaker ('1' or '0'), 17 breaker window s, 18 breaker min
// calls, 19 breaker failure ratio, 20 breaker open for µs, 21 breaker max
// open µs, 22 gate bound µs (now + max gate), 23 gates per tenant,
// 24 index member, 25 learning idle expiry µs, 26 the channel on which to
// publish the state key's name when the gate stops being plain (empty =
// none; see localAdmission); then optionally this replica's local
// admissions (see luaPending): "1" and a gate payload, or "0"; then "1"
// and a budget payload, or "0".
// Returns {closed until µs (0 = open), retry allowed (1 or 0), breaker
// open until µs (0 = not open), breaker change (0 none, 1 opened, 2
// reopened, 3 closed: store.BreakerChange)}.
var completeScript = redis.NewScript(luaHelpers + luaComplete)

//go:embed lua/complete.lua
var luaComplete string

// flushGateScript records on a gate what attempts admitted locally did
// (see luaPending).
//
// KEYS: 1 state, 2 index.
// ARGV: 1 key margin ms, 2 gates per tenant, 3 index member, then a gate
// payload (see luaPending).
// Returns 1.
var flushGateScript = redis.NewScript(luaHelpers + luaFlushGate)

//go:embed lua/flush_gate.lua
var luaFlushGate string

// flushBudgetScript counts in a tenant's budget the first attempts
// admitted locally (see luaPending).
//
// KEYS: 1 budget.
// ARGV: 1 key margin ms, then a budget payload (see luaPending).
// Returns 1.
var flushBudgetScript = redis.NewScript(luaHelpers + luaFlushBudget)

//go:embed lua/flush_budget.lua
var luaFlushBudget string

// stateScript reads the gate's state, as admitScript checks it.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota, 4 state.
// ARGV: 1 now µs.
// Returns {closed until µs (0 = open), breaker open until µs (0 = not
// open)}.
var stateScript = redis.NewScript(luaHelpers + luaGateState)

//go:embed lua/gate_state.lua
var luaGateState string

// inspectScript reads one gate's state for the admin view; it writes
// nothing but this replica's local admissions, when given.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota, 4 state, 5 index.
// ARGV: 1 now µs, 2 key margin ms, 3 gates per tenant, 4 index member,
// then optionally a gate payload (see luaPending).
// Returns {closed until µs, breaker open until µs, in flight, quota known
// (1 or 0), remaining, reset µs, learning (1 or 0), epoch, admitted, not
// accepted, learned (1 or 0), L, probe in flight (1 or 0)}.
var inspectScript = redis.NewScript(luaHelpers + luaInspect)

//go:embed lua/inspect.lua
var luaInspect string
