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
// # The in-flight rule
//
// Admit registers each admitted attempt as in flight on its gate until
// Complete (or until its ticket expires, [DefaultTicketTTL], when a broker
// crashed). When a response reports the provider's remaining quota and that
// number is at most the count of other attempts still in flight on the gate,
// the gate closes until the quota resets: those attempts will use up what is
// left, and a further attempt would surely be refused. This is how the broker
// keeps to at most one refused call per gate per quota window.
package store
