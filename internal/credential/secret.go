package credential

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// secret is one secret value, from a file or the environment. A file is
// checked for a change at most every Deps.FileCheck, when the secret is
// used (no goroutine, no watcher): os.Stat follows symlinks, so the swap
// of a Kubernetes secret mount's ..data symlink is a change like an
// in-place write. A changed file is re-read; the next attempt uses the
// new value. When a re-read fails, the last good value stays in use and
// the failure is counted (a file being rewritten is retried at the next
// check); a file that was never read is an error.
type secret struct {
	ref   SecretRef
	what  string // "credentials.NAME.value_file" etc., for errors
	cred  string
	deps  *Deps
	mu    sync.Mutex
	value []byte
	gen   uint64
	stat  fileStamp
	next  time.Time // next check of the file
}

// fileStamp is what says a file changed.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// maxSecretFile bounds a secret file's size.
const maxSecretFile = 64 << 10

// newSecret reads ref once; what names the setting in errors.
func newSecret(ref SecretRef, what, cred string, deps *Deps) (*secret, error) {
	s := &secret{ref: ref, what: what, cred: cred, deps: deps}
	switch {
	case ref.File != "" && ref.Env != "":
		return nil, fmt.Errorf("%s: set a file or an environment variable, not both", what)
	case ref.Env != "":
		getenv := deps.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		v := getenv(ref.Env)
		if v == "" {
			return nil, fmt.Errorf("%s: environment variable %s is empty or unset", what, ref.Env)
		}
		s.value, s.gen = []byte(v), 1
		return s, nil
	case ref.File != "":
		v, st, err := readSecretFile(ref.File)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		s.value, s.stat, s.gen = v, st, 1
		s.next = deps.Clock.Now().Add(deps.FileCheck)
		return s, nil
	}
	return nil, fmt.Errorf("%s: no file or environment variable set", what)
}

// get returns the current value and its generation (which changes when the
// file is re-read with a new value). The slice must not be modified.
func (s *secret) get() ([]byte, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ref.File == "" {
		return s.value, s.gen
	}
	now := s.deps.Clock.Now()
	if now.Before(s.next) {
		return s.value, s.gen
	}
	s.next = now.Add(s.deps.FileCheck)
	st, err := statSecretFile(s.ref.File)
	if err == nil && st == s.stat {
		return s.value, s.gen
	}
	var v []byte
	if err == nil {
		v, st, err = readSecretFile(s.ref.File)
	}
	if err != nil {
		s.deps.Observer.FileReload(s.deps.Tenant, s.cred, "error")
		s.deps.Log.Warn("secret file unreadable; the last value read stays in use",
			"tenant", s.deps.Tenant, "credential", s.cred, "setting", s.what, "path", s.ref.File, "error", err)
		return s.value, s.gen
	}
	s.stat = st
	if !bytes.Equal(v, s.value) {
		s.value = v
		s.gen++
		s.deps.Observer.FileReload(s.deps.Tenant, s.cred, "ok")
	}
	return s.value, s.gen
}

// unchanged reports whether gen is still the current generation, checking
// the file when its check is due (as get does).
func (s *secret) unchanged(gen uint64) bool {
	_, g := s.get()
	return g == gen
}

// text is get as a string with one trailing line ending removed.
func (s *secret) text() (string, uint64) {
	v, gen := s.get()
	return string(trimLineEnd(v)), gen
}

func trimLineEnd(v []byte) []byte {
	v = bytes.TrimSuffix(v, []byte("\n"))
	return bytes.TrimSuffix(v, []byte("\r"))
}

func statSecretFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}

func readSecretFile(path string) ([]byte, fileStamp, error) {
	// Refused before it is opened: opening a FIFO would block.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fileStamp{}, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileStamp{}, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxSecretFile {
		return nil, fileStamp{}, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	}
	v, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return nil, fileStamp{}, err
	case len(v) > maxSecretFile:
		return nil, fileStamp{}, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	case len(trimLineEnd(v)) == 0:
		return nil, fileStamp{}, errors.New(path + " is empty")
	}
	return v, stampOf(fi), nil
}
