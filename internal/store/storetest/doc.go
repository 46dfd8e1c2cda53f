// Package storetest is the behavioural test suite every store.Store must
// pass: the memory store, the Redis store on a real redis-server, and the
// Fallback wrapper. Run it from a test with Run.
package storetest
