package redistest

import (
	"os"
	"sync"
	"testing"
)

// Shared is a topology that the tests of one package share: started by the
// first test that asks for it, stopped by Close, which the package's
// TestMain calls after m.Run. A package run that never asks starts nothing.
type Shared[T interface{ Close() error }] struct {
	start func(dir string) (T, error)

	mu      sync.Mutex
	started bool
	v       T
	err     error
	dir     string
}

// NewShared returns a Shared topology that start starts, with its files
// under a temporary directory that Close removes.
func NewShared[T interface{ Close() error }](start func(dir string) (T, error)) *Shared[T] {
	return &Shared[T]{start: start}
}

// SharedCluster returns a Shared cluster of cfg's shape.
func SharedCluster(cfg ClusterConfig) *Shared[*Cluster] {
	return NewShared(func(dir string) (*Cluster, error) { return NewCluster(dir, cfg) })
}

// SharedSentinel returns a Shared master, replica and sentinel.
func SharedSentinel() *Shared[*Sentinel] { return NewShared(NewSentinel) }

// SharedTLS returns a Shared TLS server.
func SharedTLS() *Shared[*TLSServer] { return NewShared(NewTLS) }

// Get returns the topology, starting it on first use; it calls tb.Fatal
// when it could not be started (and every later Get fails the same way).
func (s *Shared[T]) Get(tb testing.TB) T {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.dir, s.err = os.MkdirTemp("", "redistest")
		if s.err == nil {
			s.v, s.err = s.start(s.dir)
		}
	}
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.v
}

// Close stops the topology if it was started, and removes its files.
func (s *Shared[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.err != nil {
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
		return nil
	}
	s.started = false
	err := s.v.Close()
	_ = os.RemoveAll(s.dir)
	return err
}
