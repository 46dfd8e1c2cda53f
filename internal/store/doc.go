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
// [WithFailClosed]) get [ErrUnavailable] instead of local state.
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
package store
