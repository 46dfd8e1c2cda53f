// Package redistest starts real redis-server processes for tests, on
// loopback ports only:
//
//   - [StartServer]: one server. Stop and Restart take it down and bring
//     it back on the same port, Pause and Resume freeze it, to test
//     outages.
//   - [StartCluster]: a Redis Cluster (3 masters, optionally with
//     replicas), formed with CLUSTER ADDSLOTSRANGE, MEET and REPLICATE;
//     [Cluster.Failover] runs CLUSTER FAILOVER on a replica.
//   - [StartSentinel]: a master, a replica and a sentinel (redis-server
//     --sentinel, quorum 1); [Sentinel.KillMaster] kills the master by
//     its pid and waits for the promotion.
//   - [StartTLS]: a server that accepts only TLS with a client certificate
//     from a CA generated at start, and only ACL users with a password.
//
// Cluster and Sentinel nodes know the ACL user [UserBroker] with exactly
// [BrokerACL], the permissions the broker needs.
//
// Servers keep nothing on disk (--save "" --appendonly no). Every process
// is stopped by its own pid at cleanup, with bounded waits, and is also
// killed by the kernel if the test binary dies first (Linux). [Shared]
// lets the tests of one package share a topology, started on first use and
// stopped from TestMain. When redis-server is not on PATH the test fails
// (it does not skip): run "make test", which installs it.
package redistest
