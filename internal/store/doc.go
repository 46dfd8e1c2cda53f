// Package store holds the broker's shared state behind small domain
// interfaces: cooldown gates with in-flight and quota tracking, per-tenant
// retry budgets, and per-(tenant, host) pacing.
//
// Two implementations satisfy [Store]:
//
//   - memstore: in-process state, the default for a single broker;
//   - redisstore: shared state in Redis (one Lua script per operation), so
//     that several broker replicas act as one, on a single server, Redis
//     Cluster or Sentinel.
//
// [Fallback] wraps a shared (Redis) store and a local (memory) store: while
// the shared store fails it serves from local state, reports itself
// degraded with a named [Cause] (unreachable, or a misconfiguration such as
// wrongpass, noperm, oom, readonly, or moved for a cluster behind a
// single-node client), and probes the shared store until it recovers.
// Recovery is proven, not assumed: a [Verifier] primary (redisstore) must
// run its own operations, writes included, before the Fallback returns to
// it, and a primary that flaps must pass every probe for a growing
// hold-down. Calls marked fail-closed (or every call, with
// [WithFailClosed]) get [ErrUnavailable] instead of local state. A healthy
// Fallback also pings the shared store on a ticker ([WithHealthInterval]),
// so that it degrades without traffic; one made [WithStartWait] serves no
// call at all, from either store, before its first verification ends.
//
// # Time
//
// Every request carries the caller's clock reading (Now). Stores never read
// a clock of their own, so tests drive time by passing it, and replicas
// sharing Redis must keep their clocks roughly synchronized (NTP): a skew of
// d lets a replica reopen a gate, or take a pacing slot, up to d early.
// Stores keep time at microsecond resolution; finer parts are truncated.
//
// # Quotas and the in-flight rule
//
// Many providers report their remaining quota and its reset time on every
// response; the broker keeps the goal of at most one refused call per gate
// per quota window with two rules:
//
//   - When a response reports a remaining count of 0, the gate closes until
//     the quota resets: a further attempt would surely be refused.
//   - The store keeps each gate's last known quota (remaining count and
//     reset), and Admit refuses an attempt, with GateClosedUntil = the
//     reset, while remaining - (attempts in flight) <= 0. Every attempt in
//     flight thus counts against the known remaining count, so a burst of
//     Admits between two responses never goes beyond it. An attempt
//     completed without a response gives its share back.
//
// A count that falls to the attempts in flight is left to the second rule
// rather than closing the gate outright: attempts still registered may
// already have been served (their responses are on the way), and a sticky
// close would strand quota until the reset. Admit's check is re-evaluated
// on every call, so the gate reopens as soon as the count allows.
//
// Admit counts attempts in flight only on a gate with a known quota (a
// remaining count whose window has not reset), so that is the only case in
// which Admit registers an attempt as in flight: until Complete, or until
// its ticket expires ([DefaultTicketTTL]) when a broker crashed. On any
// other gate Admit registers nothing and returns an empty Ticket, and an
// attempt whose response reports nothing about the gate and that spends no
// retry needs no Complete: one round trip per attempt.
//
// As a consequence, attempts admitted while the gate had no known quota
// (the first burst of a window, sent before any response reported a
// remaining count, or any attempt after the known reset passed) are never
// counted in flight, even when a response makes the quota known while they
// are still out. The first burst of a window was already unbounded, and
// the limit stays the same: the attempts sent beyond a window's quota are
// at most those admitted before the quota was known (when every response
// reports the quota; an attempt that fails in transit after the provider
// counted it gives its share back all the same). What changes is how
// that allowance is used: the burst no longer holds shares of the remaining
// count once it is known, so the first response does not close the gate
// because of it, and Admit may admit up to that many more attempts than
// the provider will take, where it used to refuse them in advance. From
// the first known quota on, every admitted attempt is counted.
//
// The known quota follows the responses: a later window (a reset more than
// [QuotaWindowTolerance] after the known one) replaces it; within the same
// window the smallest remaining count wins, because responses arrive out of
// order; a response from an older window changes nothing; a response whose
// reset already passed clears it. Once its reset passes, the known quota is
// ignored and calls are admitted freely until the next response reports
// one. [Observation.HasQuota] gives the details.
//
// # Learned quotas
//
// Providers that announce nothing until they refuse (Retry-After only)
// would let every call in flight when the first refusal arrives be refused
// too. For a gate without a live known quota, and for requests with
// [LearningConfig.Enabled], the store learns how many calls a window
// admits. A gate with a live announced quota keeps the rules above and
// ignores learning (its attempts carry no epoch).
//
//   - An epoch starts at the first learning Admit on a gate ("fresh": nothing
//     is known), again at the first Admit after the gate reopens following
//     a refusal ("reopen"), and at the first Admit after a reopen epoch's
//     learned window passed without a refusal (a new window of the same L;
//     see below). Every attempt admitted in it carries its id in
//     [Ticket.Epoch] (registered or not). Ids are distinct per gate, even
//     after learned state was forgotten.
//
//   - The store counts, per epoch, the calls admitted (probes included) and
//     those not accepted: results [ResultRefused] and [ResultFailed]
//     completed with a ticket of that epoch. [ResultNone] gives its share
//     back (admitted − 1). [ResultLost] and [ResultBroken] keep it and do
//     not count as not accepted: the provider may have counted the call.
//     [ResultAccepted] counts for the probe, and in a fresh epoch for its
//     slow start.
//
//   - A refusal ends the current epoch: Result Refused with the current
//     epoch, or with none (Observe, a policy with learning off). A refusal
//     from an earlier epoch (a late answer from an earlier window) closes the
//     gate by its hint as usual but does not end the current epoch.
//
//   - At the start of a reopen epoch, the learned quota becomes L = admitted −
//     not accepted of the ended epoch, computed then, when its calls have
//     come back; a call still out counts as accepted. After an epoch that
//     began at a reopening, L is exact; after a fresh one it is a floor.
//     Either way the epoch admits its first L calls at once, registered in
//     flight (with a ticket, like calls against a known quota), so that
//     their Complete tells the store they are back.
//     A late result of the epoch before (anything but accepted) lowers L by
//     one, as it would have had it come back in time; results of older
//     epochs change nothing.
//
//   - Beyond L, at most one unproven call is in flight: the probe
//     ([Admission.Probe]), registered with a ticket that lives the ticket TTL.
//     It goes only once the epoch's learned calls are back (Admit answers
//     Held while any is registered in flight): an accepted probe must show
//     room beyond them, not win a race against the slowest of them to the
//     provider (which would raise L past the quota and cost a second
//     refusal in the next window).
//     While it is out, Admit answers [Admission.Held] with HeldFor, a short
//     poll (at most 100 ms, and never beyond the probe's registration). An
//     accepted probe raises L by one and frees the slot at once, so the next
//     call probes; a refused probe closes the gate with its hint and ends the
//     epoch; a failed or unsent probe frees the slot (a failed one counts as
//     not accepted); a probe whose ticket expires frees the slot, and its
//     late result no longer counts as the probe's.
//
//   - Learned state is forgotten after [LearningConfig.Expiry] without a
//     learning Admit on the gate (a held Admit counts). For an epoch that a
//     refusal ended, the idle time runs from the gate's reopening, so a
//     close longer than the idle expiry does not forget L.
//
//   - The learned window W is the time between the reopening a reopen epoch
//     began at and the reopening its refusal set (the gate's closed-until
//     time then). A reopen epoch that reaches its start + W without a
//     refusal ends at the next Admit: a new epoch of the same L begins,
//     started at the window boundary (start + k·W), so a quiet window
//     carries neither its count nor its probing into the next. Until W is
//     known, an epoch lasts until a refusal.
//
// So after the first epoch a window costs at most one refusal per gate, and
// when the gate reopens at most L held calls go, never before the gate's
// closed-until time. A shrinking quota shows up as an earlier refusal, which
// lowers L at the next epoch.
//
// # The first window
//
// With [LearningConfig.FirstWindow] (the standard learning), a fresh epoch
// does not admit every call at once:
//
//   - While the epoch has no accepted result, each Admit goes as its scout:
//     [Admission.Probe], registered in the probe slot for at most
//     [LearningConfig.Hold], and the others are held (HeldFor at most
//     100 ms). A scout with no answer by its hold frees the slot; the next
//     Admit scouts.
//   - An accepted result that announces a quota makes it known: the rules of
//     known quotas apply, and learning stands aside.
//   - Otherwise, slow start: at most [SlowStartLimit] (1 + accepted /
//     [SlowStartShare]) calls in flight, registered with tickets; Admit holds
//     the rest. When the limit would reach [SlowStartMax], slow start ends and
//     the epoch admits freely, unregistered, until a refusal.
//   - A known quota whose reset passed, on a gate with learned state, starts
//     a new fresh epoch at the next learning Admit: its next window is
//     scouted too.
//
// # Failure breaker
//
// For requests with [BreakerConfig.Enabled] (its Normalized values apply),
// each gate counts calls and failures over a sliding window of
// WindowSeconds one-second buckets: every attempt Admit admits is a call;
// [ResultFailed] at Complete is a failure. Observe, whose callers are not
// admitted, counts every answer but [ResultNone] as a call, and a failure as
// a failure.
//
//   - After a failure, when calls ≥ MinCalls and failures ≥ FailureRatio ×
//     calls, the breaker opens until now + OpenFor × 2^k (k = failed probes
//     since it last closed), at most MaxOpen and never past the gate bound
//     (now + max gate). While open, Admit answers [Admission.BreakerOpenUntil]
//     (the gate's own closed time comes first), counting, reserving and
//     registering nothing; GateState, Observe and Complete report it in
//     BreakerOpenUntil. Results change nothing while it is open.
//   - Then it is half open: the first Admit goes as the probe (registered),
//     the others are held, sharing the probe slot of learned quotas: when
//     both want a probe there is one, and its result counts for both. The
//     probe's acceptance (or refusal: the destination answered) closes the
//     breaker and clears its counts (k = 0); its failure opens it again with
//     k + 1; a probe not sent, or expired, frees the slot. While half open,
//     an Observe result decides like a probe's (ClassifyResponse callers
//     have no probe of their own).
//   - A half-open breaker is kept MaxOpen after its open time and after its
//     last probe's registration (at most the max gate); one without traffic
//     for that long, or closed with no calls left in its window, is
//     forgotten.
//   - Requests with the breaker off neither feed it nor wait on it (another
//     policy on the same gate may have it on). GateState reports it
//     whatever the caller's policy.
//
// # Bounds
//
// Every gate time is computed from the caller's Now and bounded by now +
// max gate ([GateBound]): CloseUntil hints, quota resets, breaker open
// times. Every expiry follows from these bounded times (in Redis, every key
// TTL), and learned state from [MaxLearningIdleExpiry] at most.
//
// The number of gates per tenant is bounded (a store option, default
// 10,000): a gate is all the state of one [GateKey] (closed-until time,
// known quota and its calls in flight, probe, learned quota, breaker). A
// gate holds a promise to a provider while it is closed (a hint, or a
// quota reported exhausted) or its breaker is open; the rest of its state
// is soft (a learned quota, breaker counts, a half-open breaker, a known
// quota with calls left, calls in flight, the probe slot). When a tenant at
// the bound needs a new gate, its gates that hold nothing live any more
// are forgotten first, then, among those that hold no promise, those that
// free soonest (whose state expires first) are evicted, 1/16 of the bound
// at a time so that the cost of choosing them is amortized over as many
// new gates. A bound never evicts a promise: when every gate of the tenant
// holds one, the new gate is not tracked (the call proceeds as on an open
// gate, the store keeps none of it, and the store's untracked option hears
// of it), and new gates stay refused, at the cost of one look-up, until
// enough promises have ended (as time passes) to make a whole batch. Each
// store keeps a per-tenant index for this, so eviction never looks at, or
// takes from, another tenant. Evicting a soft gate forgets it: its calls
// in flight count no more and its learned quota is learned again. Reading
// a gate (GateState) creates none.
package store
