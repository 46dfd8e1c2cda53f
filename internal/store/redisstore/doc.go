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
//	rb:v1:{v:<n>}:<kind>:<id>                   verification keys (see Verify): the same kinds, one set per verification
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
// An ACL user needs, on the keys of the prefix (~rb:v1:*), the commands of
// redistest.BrokerACL: PING, CLUSTER SLOTS (cluster), EVALSHA, EVAL,
// SCRIPT LOAD, and the commands the scripts run (GET SET DEL PEXPIRE PTTL
// HGET HMGET HSET HINCRBY HGETALL ZADD ZREM ZCOUNT ZREMRANGEBYSCORE).
//
// # Failures
//
// Open never fails because Redis is down or misconfigured: the clients
// connect lazily. Each call is bounded by its ctx (ContextTimeoutEnabled)
// and by short client timeouts (500 ms dial, read and write, one retry)
// unless the URL or [WithTimeouts] sets them. Errors wrap
// store.ErrUnavailable; they carry no credentials.
package redisstore
