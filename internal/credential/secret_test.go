package credential

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// reloads records FileReload results.
type reloads struct {
	NopObserver
	mu      sync.Mutex
	results []string
}

func (r *reloads) FileReload(_, _, result string) {
	r.mu.Lock()
	r.results = append(r.results, result)
	r.mu.Unlock()
}

func headerCredential(t *testing.T, path string, clock Clock, obs Observer) Credential {
	t.Helper()
	c, err := New(Spec{Name: "api", Kind: KindHeader, Header: &HeaderSpec{Name: "authorization", Prefix: "Bearer ", Value: SecretRef{File: path}}},
		Deps{Tenant: "t1", Clock: clock, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func applied(t *testing.T, c Credential) (string, Stamp) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	req.Header.Set("Authorization", "caller")
	st, err := c.Apply(context.Background(), req, NewCall(nil))
	if err != nil {
		t.Fatal(err)
	}
	if v := req.Header.Values("Authorization"); len(v) != 1 {
		t.Fatalf("Authorization set %d times, want once (set, never appended)", len(v))
	}
	return req.Header.Get("Authorization"), st
}

// TestSecretFileRotation: a changed file is re-read at the first use after
// the check interval (not before), with a new generation and an "ok"
// reload; a removed file keeps the last value, counted as "error"; the
// file back is read again.
func TestSecretFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.Unix(1_800_000_000, 0)}
	obs := &reloads{}
	c := headerCredential(t, path, clock, obs)
	if c.Headers()[0] != "Authorization" || c.Rejected(Stamp{}) {
		t.Fatalf("headers %v", c.Headers())
	}
	v, st1 := applied(t, c)
	if v != "Bearer one" {
		t.Fatalf("applied %q", v)
	}
	if err := os.WriteFile(path, []byte("two-longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := applied(t, c); v != "Bearer one" {
		t.Fatalf("re-read before the check interval: %q", v)
	}
	clock.advance(time.Second)
	v, st2 := applied(t, c)
	if v != "Bearer two-longer" || st2.Generation == st1.Generation {
		t.Fatalf("after the interval: %q, generation %d -> %d", v, st1.Generation, st2.Generation)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Second)
	if v, st := applied(t, c); v != "Bearer two-longer" || st != st2 {
		t.Fatalf("with the file gone: %q %v, want the last good value", v, st)
	}
	if err := os.WriteFile(path, []byte("three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Second)
	if v, _ := applied(t, c); v != "Bearer three" {
		t.Fatalf("with the file back: %q", v)
	}
	if got := strings.Join(obs.results, ","); got != "ok,error,ok" {
		t.Fatalf("reloads %s, want ok,error,ok", got)
	}
}

// TestSecretFileRefusals: at load, a missing, empty, oversized or
// non-regular file (a FIFO, which would block an open) is an error naming
// the path and never a value; so is an unset variable.
func TestSecretFileRefusals(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	big := filepath.Join(dir, "big")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte(strings.Repeat("x", maxSecretFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  SecretRef
		want string
	}{
		{SecretRef{File: filepath.Join(dir, "gone")}, "no such file"},
		{SecretRef{File: empty}, "is empty"},
		{SecretRef{File: big}, "larger than 65536 bytes"},
		{SecretRef{File: fifo}, "not a regular file"},
		{SecretRef{Env: "RB_CREDENTIAL_TEST_UNSET"}, "RB_CREDENTIAL_TEST_UNSET is empty or unset"},
		{SecretRef{}, "no file or environment variable"},
		{SecretRef{File: empty, Env: "X"}, "not both"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := New(Spec{Name: "api", Kind: KindHeader, Header: &HeaderSpec{Name: "X-Key", Value: tc.ref}}, Deps{Getenv: func(string) string { return "" }})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "xxxx") {
				t.Errorf("%+v: %v, want an error containing %q", tc.ref, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%+v: New blocked", tc.ref)
		}
	}
}

// TestHeaderValueUnavailable: a secret that is no valid header value is
// refused at load, and once rotated in makes Apply fail with an
// *UnavailableError that names the credential and not the value.
func TestHeaderValueUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("ok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.Unix(1_800_000_000, 0)}
	c := headerCredential(t, path, clock, nil)
	if err := os.WriteFile(path, []byte("bad\x01secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Second)
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	_, err := c.Apply(context.Background(), req, NewCall(nil))
	var u *UnavailableError
	if !errors.As(err, &u) || u.Credential != "api" || strings.Contains(err.Error(), "secret") && strings.Contains(err.Error(), "bad") {
		t.Fatalf("apply: %v", err)
	}
	if req.Header.Get("Authorization") != "" {
		t.Fatal("a broken value was set")
	}
}

// TestCallBodyHashOnce: the payload hash is the body's SHA-256, computed
// once per call.
func TestCallBodyHashOnce(t *testing.T) {
	c := NewCall([]byte("abc"))
	a, b := c.BodySHA256(), c.BodySHA256()
	if string(c.Body()) != "abc" || &a[0] != &b[0] || len(a) != 32 || a[0] != 0xba {
		t.Fatalf("hash %x", a)
	}
}
