// Package store holds the broker's shared state behind small domain
// interfaces: cooldown gates with in-flight and quota tracking, per-tenant
// retry budgets, and per-(tenant, host) pacing.
//
// Two implementations satisfy [Store]:
//
//   - memstore: in-process state, the default for a single broker;
//   - redisstore: shared state in Redis (one Lua script per operation), so
//     that several broker replicas act as one.
//
// [Fallback] wraps a shared (Redis) store and a local (memory) store: while
// the shared store is unreachable it serves from local state, reports itself
// degraded and probes the shared store until it recovers. With
// [WithFailClosed] it returns [ErrUnavailable] instead.
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
// Admit registers each admitted attempt as in flight on its gate until
// Complete (or until its ticket expires, [DefaultTicketTTL], when a broker
// crashed). Many providers report their remaining quota and its reset time
// on every response; the broker keeps the goal of at most one refused call
// per gate per quota window with two rules:
//
//   - When a response reports a remaining count that is at most the number
//     of other attempts still in flight on the gate, the gate closes until
//     the quota resets: those attempts will use up what is left, and a
//     further attempt would surely be refused.
//   - The store keeps each gate's last known quota (remaining count and
//     reset), and Admit refuses an attempt, with GateClosedUntil = the
//     reset, while remaining - (attempts in flight) <= 0. Every attempt in
//     flight thus counts against the known remaining count, so a burst of
//     Admits between two responses never goes beyond it. An attempt
//     completed without a response gives its share back.
//
// The known quota follows the responses: a later window (a reset more than
// [QuotaWindowTolerance] after the known one) replaces it; within the same
// window the smallest remaining count wins, because responses arrive out of
// order; a response from an older window changes nothing; a response whose
// reset already passed clears it. Once its reset passes, the known quota is
// ignored and calls are admitted freely until the next response reports
// one. [Observation.HasQuota] gives the details.
package store
