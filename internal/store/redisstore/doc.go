// Package redisstore is the Redis implementation of store.Store, through
// which several broker replicas share cooldown gates, in-flight counts,
// retry budgets and pacing.
//
// # Topologies
//
// [Open] takes a [Config] naming one topology and makes go-redis's own
// client for it: a single server (a URL: redis://, rediss:// for TLS, or
// unix://), Redis Cluster (seed nodes; the cluster client follows MOVED
// and ASK and reloads the slot map after a failover) or Sentinel (a master
// name and sentinels; the failover client asks them for the master on each
// new connection and drops connections to a demoted master). Managed
// services are one of these: in cluster mode they are Redis Cluster. TLS
// ([Config.TLS]) and ACL credentials apply to every topology. New is Open
// with a URL.
//
// # Verification
//
// [Store.Verify] proves, rather than assumes, that the store works on
// what it is connected to: it runs the store's own three scripts, writes
// included, on reserved keys and checks every result, on every master of a
// cluster, and on a non-cluster client it reads 15 more hash tags so that a
// cluster behind a single-node client is found out by MOVED. store.Fallback
// runs it at start and before every return to Redis, so a server that
// answers PING but refuses writes (out of memory, read-only) is not taken
// for healthy.
//
// Errors are [*Error] values naming their cause ([Classify]): MOVED or
// ASK (a cluster behind a single-node client), CROSSSLOT, NOPERM,
// WRONGPASS or NOAUTH, OOM, READONLY (a replica), a cluster client on a
// server without cluster support, CLUSTERDOWN, MASTERDOWN, LOADING, TLS
// and certificate errors, sentinels that know no such master, and
// unexpected results; only errors the server never answered are
// "unreachable".
//
// # Atomicity and round trips
//
// Admit, Complete (and Observe) and GateState each run one Lua script with
// EVALSHA (falling back to EVAL once when the server lost its script cache),
// so each is one atomic round trip, whatever Admit answers (admitted, probe,
// held, gate closed, breaker open, pace denied). GateState's script only
// reads. Admit registers the attempt in the in-flight set only when the
// gate has a known quota, and in the probe slot only when it goes as the
// probe; otherwise it returns an empty ticket and writes no in-flight key,
// and an accepted attempt with nothing to observe and no retry to spend
// needs no Complete: one round trip in all, with learning and the breaker
// on. A probe, a refusal, a failure, an observation or a retry to spend
// costs one more (Complete).
//
// With local admission ([WithLocalAdmission], on by default) an Admit on a
// plain gate costs no round trip once the script has reported the gate
// plain: the store admits by itself until the TTL runs out or any replica
// announces, on the channel <prefix>plain, that it made the gate non-plain
// (Complete's script publishes the gate's state key); the counts reach
// Redis within 10 ms, before any other script of the same store on that
// gate. See localAdmission in local.go for the guarantees.
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
//	rb:v1:{t:<tenant>}:s:<scope>:<credential>   learned quota, probe slot, breaker: HASH (below)
//	rb:v1:{t:<tenant>}:o:<scope>:<credential>   the replicas' queues (store.Order): HASH replica -> expiry, count, then arrival, deadline pairs, Unix µs
//	rb:v1:{t:<tenant>}:p:<host>                 pacing: GCRA theoretical arrival time, Unix µs (string)
//	rb:v1:{t:<tenant>}:b                        retry budget: HASH of one-second buckets
//	rb:v1:{t:<tenant>}:i                        gate index: ZSET <scope>:<credential> -> frees at, Unix µs
//	rb:v1:{t:%00verify-<run>-<n>}:<kind>:…      verification keys (see Verify): the same kinds, under tenant ids no configuration can hold, new for each run of each replica
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
// The state hash holds the gate's learned quota, probe slot and breaker
// (see the store package documentation for the rules; memstore has the
// same code in Go). Learned quota: le, the current epoch's id (its start,
// Unix µs, or one more than the previous id); lp, the previous epoch's id;
// lk, "1" once L is known (a reopen epoch); lL, L; la, the calls admitted
// in the epoch; ln, those not accepted; ld, "1" once a refusal ended it;
// lx, when it is forgotten (Unix µs: the last learning Admit plus the idle
// expiry, or for an ended epoch the gate's reopening plus it). Probe slot: pi, the probe's ticket id; px, when its registration
// ends (Unix µs); pe, its epoch; pl and pb, "1" when it probes for the
// learned quota and for the breaker. Breaker: bo, open until (Unix µs; 0
// closed, past = half open); bk, failed probes since it last closed; br, how
// long it is kept after its open time or its probe (µs); bx, when it is
// forgotten (Unix µs); and per bucket i = second mod window, bs<i> (the
// Unix second counted), bc<i> (calls) and bf<i> (failures). A part whose
// expiry (lx, px, bx) passed reads as absent. Two more fields cache what a
// script would otherwise ask the server on every call: kx, until when the
// key lives (Unix µs, as last set with PEXPIRE), and ix, the gate's score
// in the index as last seen. A script reads the hash with one HMGET (the
// breaker's current bucket included) and writes it with one HSET, so an
// Admit with learning, the breaker and a budget runs about six commands
// (GET, three HMGET, HSET, HINCRBY).
//
// The gate index holds one member per gate of the tenant, the gate's key
// names after the kind ("<scope>:<credential>", escaped), scored with the
// time its state frees (Unix µs, margin included) plus some slack: a
// quarter of its remaining life, at most 5 minutes, so that a gate in
// steady use is written to the index every few minutes rather than on every
// call. The index is written only when a gate is created or its state
// outlives its score. When a new gate would take a tenant over the bound
// ([WithMaxGatesPerTenant], default 10,000), the same script removes the
// members whose score passed (their keys expired before it), then evicts,
// lowest-scored first, 1/16 of the bound among the gates that hold no
// promise (its g key's time passed and its breaker is not open; members
// are read 500 at a time, with one MGET of their g keys and one HMGET of
// the breaker of each that no g key closes), deleting their g, f, q and s
// keys.
// A gate that holds a promise is never evicted. When fewer than the batch
// hold none, the script evicts those and writes the tenant's full key
// ("<prefix>{t:<tenant>}:full": the time, Unix µs, until when enough
// promises end to make the batch, with a TTL to match); until then a new
// gate is refused with one GET: the script deletes what it wrote of the
// new gate, writes no more of it, and its answer says so (admitScript's
// eighth value, completeScript's fifth), for [WithUntracked].
// These key names are rebuilt inside the script from the member and the
// index's own name, so they are not declared in the script's KEYS: they
// share the index's hash tag, hence its slot, so this is safe on Redis
// Cluster too (and on a single server, where undeclared keys are allowed).
// The slack makes eviction order approximate: a gate may be evicted up to
// its slack before one that frees later.
//
// The budget hash holds, for bucket i = second mod window, the fields
// s<i> (the Unix second the bucket counts), q<i> (first attempts) and
// r<i> (retries); a bucket whose second left the window counts nothing
// and is reset on its next write. Its kx field caches until when it lives,
// as the state hash's does.
//
// # Expiry
//
// Every key written has a TTL: a gate lives until it reopens plus a margin
// (10 s), the quota hash until its window's reset plus the margin (it is
// deleted early when a response reports that the window reset), the
// in-flight set (written only for gates with a known quota) until its
// newest ticket expires plus the margin, the state hash until the latest of
// its live parts' expiries (learned quota: idle expiry, refreshed on each
// learning Admit; probe: ticket TTL; breaker: its window after the last
// count, or its keep time after it opened) plus the margin, the index until
// its highest score plus the margin, the budget hash for its window plus
// the margin, and the pacing key until its theoretical arrival time passes.
// The state and budget hashes get their TTL raised only when their need
// passes the TTL last set (kx), and then with slack, so that a gate in
// steady use sets it now and then rather than on every call: the state
// hash a quarter of its remaining life more (at most 5 minutes), the budget
// hash one window more. A gate's index score covers its state hash's TTL,
// slack included, plus the index's own slack.
// Every gate time is clamped to now + max gate before it is stored
// (CloseUntil, quota resets, the breaker's open and keep times), and the
// learned quota's idle expiry to a week, so every TTL follows from a
// clamped time: a Retry-After of ten years keeps a key no longer than the
// max gate (default 24 h) plus the margin.
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
// An ACL user needs, on the keys and channels of the prefix (~rb:v1:*
// &rb:v1:*), the commands of redistest.BrokerACL: PING, CLUSTER SLOTS
// (cluster), EVALSHA, EVAL, SCRIPT LOAD, PUBLISH and SUBSCRIBE (local
// admission), and the commands the scripts run (GET SET DEL PEXPIRE PTTL
// HGET HMGET HSET HDEL HINCRBY HGETALL HKEYS ZADD ZREM ZCARD ZCOUNT ZRANGE
// ZRANGEBYSCORE ZREMRANGEBYSCORE ZSCORE).
//
// # Failures
//
// Open never fails because Redis is down or misconfigured: the clients
// connect lazily. Each call is bounded by its ctx (ContextTimeoutEnabled)
// and by short client timeouts (500 ms dial, read and write, one retry)
// unless the URL or [WithTimeouts] sets them. Errors wrap
// store.ErrUnavailable; they carry no credentials.
package redisstore
