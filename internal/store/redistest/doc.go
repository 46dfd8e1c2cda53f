// Package redistest starts real redis-server processes for tests.
//
// A server listens on a free loopback port, keeps nothing on disk
// (--save "" --appendonly no) and is killed when the test ends. Stop and
// Restart take it down and bring it back on the same port, to test outages.
// When redis-server is not on PATH the test fails (it does not skip): run
// "make test", which installs it.
package redistest
