// Package redisstore is the Redis implementation of store.Store, through
// which several broker replicas share cooldown gates, in-flight counts,
// retry budgets and pacing.
//
// # Atomicity and round trips
//
// Admit, Complete (and Observe) and GateState each run one Lua script with
// EVALSHA (falling back to EVAL once when the server lost its script cache),
// so each is one atomic round trip. GateState's script only reads. Admit
// registers the attempt in the in-flight set only when the gate has a known
// quota; otherwise it returns an empty ticket and writes no in-flight key,
// and an attempt with nothing to observe and no retry to spend needs no
// Complete: one round trip in all.
//
// # Keys
//
// Every key starts with a prefix (default "rb:v1:"), then a Redis Cluster
// hash tag holding the escaped tenant, then the kind of state and its
// escaped components, separated by ":":
//
//	rb:v1:{t:<tenant>}:g:<scope>:<credential>   gate: closed-until, Unix µs (string)
//	rb:v1:{t:<tenant>}:f:<scope>:<credential>   in flight: ZSET ticket id -> expiry, Unix µs
//	rb:v1:{t:<tenant>}:q:<scope>:<credential>   known quota: HASH r, w, u
//	rb:v1:{t:<tenant>}:p:<host>                 pacing: GCRA theoretical arrival time, Unix µs (string)
//	rb:v1:{t:<tenant>}:b                        retry budget: HASH of one-second buckets
//
// Components are percent-escaped: every byte outside [A-Za-z0-9._~-] is
// written as %XX, so no component contains ":", "{", "}" or "%" and no two
// distinct (tenant, scope, credential) triples map to one key. All keys of a
// tenant share one hash tag, so the scripts also work on Redis Cluster.
//
// The quota hash holds the gate's last known provider quota (see
// store.Observation.HasQuota): r, the remaining count; w, the first reset
// seen for the window (Unix µs), which identifies the window; and u, the
// latest reset seen for it (Unix µs). A hash whose u has passed is ignored.
// It lives in its own key, so that replicas of an older version, which only
// GET the gate key, keep working during a rolling upgrade (without the
// quota check).
//
// The budget hash holds, for bucket i = second mod window, the fields
// s<i> (the Unix second the bucket counts), q<i> (first attempts) and
// r<i> (retries); a bucket whose second left the window counts nothing
// and is reset on its next write.
//
// # Expiry
//
// Every key written has a TTL: a gate lives until it reopens plus a margin
// (10 s), the quota hash until its window's reset plus the margin (it is
// deleted early when a response reports that the window reset), the
// in-flight set (written only for gates with a known quota) until its
// newest ticket expires plus the margin, the budget
// hash for its window plus the margin, and the pacing key until its
// theoretical arrival time passes.
//
// # Time
//
// Scripts use the clock passed in each request (Now), never Redis TIME, so
// tests drive time and results do not depend on the Redis host's clock.
// Replicas must keep their clocks roughly synchronized (NTP): a replica whose
// clock runs d ahead sees gates reopen, and pacing slots free up, d early.
// TTLs are set relative (PEXPIRE), so clock skew between brokers and Redis
// never expires a key early.
//
// # Failures
//
// New never fails because Redis is down: the client connects lazily. Each
// call is bounded by its ctx (ContextTimeoutEnabled) and by short client
// timeouts (500 ms dial, read and write, one retry) unless the URL sets
// them. Errors wrap store.ErrUnavailable; they carry no credentials.
package redisstore
