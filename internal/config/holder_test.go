package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// configFor returns a valid configuration with one tenant per id, each
// with the key "<id>-key".
func configFor(ids ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\ntenants:\n")
	for _, id := range ids {
		h := sha256.Sum256([]byte(id + "-key"))
		fmt.Fprintf(&b, "  - id: %s\n    api_key_sha256: [%s]\n", id, hex.EncodeToString(h[:]))
	}
	return b.String()
}

// replaceFile writes body to a temporary file beside path and renames it
// over path, as editors and config management tools do.
func replaceFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of a gathered counter or gauge, selecting by
// label value when label is not empty.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s{%s} not found", name, label)
	return 0
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hasTenant(h *Holder, id string) bool {
	_, ok := h.Directory().Tenant(id)
	return ok
}

func TestReloadKeepsLastGood(t *testing.T) {
	path := writeConfig(t, "broker.yaml", configFor("team-a"))
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var reloaded atomic.Int32
	h, err := NewHolder(path, reg,
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithOnReload(func(*Directory) { reloaded.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	first := h.Directory()
	if first.Len() != 1 || metric(t, reg, "retrybroker_config_tenants", "") != 1 {
		t.Fatalf("initial load: %d tenants", first.Len())
	}

	// good -> bad: the old configuration stays.
	replaceFile(t, path, configFor("team-a")+"  - id: team-a\n    api_key_sha256: [bad]\n")
	err = h.Reload()
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("Reload(bad) = %v, want 2 problems", err)
	}
	if h.Directory() != first {
		t.Error("a failed reload replaced the configuration")
	}
	if got := metric(t, reg, "retrybroker_config_reload_failures_total", ""); got != 1 {
		t.Errorf("failures = %v, want 1", got)
	}
	if got := metric(t, reg, "retrybroker_config_reloads_total", "failure"); got != 1 {
		t.Errorf("reloads{failure} = %v, want 1", got)
	}
	if got := metric(t, reg, "retrybroker_config_last_reload_successful", ""); got != 0 {
		t.Errorf("last_reload_successful = %v, want 0", got)
	}
	if !strings.Contains(logs.String(), "configuration reload failed") || !strings.Contains(logs.String(), "duplicate tenant id") {
		t.Errorf("log does not say why:\n%s", logs.String())
	}
	if reloaded.Load() != 0 {
		t.Error("OnReload called for a failed reload")
	}

	// bad -> good: the new configuration is served.
	replaceFile(t, path, configFor("team-a", "team-b", "team-c"))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if h.Directory().Len() != 3 || !hasTenant(h, "team-c") {
		t.Errorf("after good reload: %d tenants", h.Directory().Len())
	}
	if got := metric(t, reg, "retrybroker_config_reloads_total", "success"); got != 1 {
		t.Errorf("reloads{success} = %v, want 1", got)
	}
	if got := metric(t, reg, "retrybroker_config_tenants", ""); got != 3 {
		t.Errorf("tenants gauge = %v, want 3", got)
	}
	if got := metric(t, reg, "retrybroker_config_last_reload_successful", ""); got != 1 {
		t.Errorf("last_reload_successful = %v, want 1", got)
	}
	if reloaded.Load() != 1 {
		t.Errorf("OnReload called %d times, want 1", reloaded.Load())
	}

	// A missing file is a failed reload too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload(missing) = %v", err)
	}
	if h.Directory().Len() != 3 {
		t.Error("missing file replaced the configuration")
	}
}

func TestNewHolderErrors(t *testing.T) {
	bad := writeConfig(t, "bad.yaml", "version: 1\n")
	if _, err := NewHolder(bad, nil); err == nil {
		t.Error("NewHolder accepted an invalid file")
	}
	good := writeConfig(t, "good.yaml", configFor("a"))
	reg := prometheus.NewRegistry()
	if _, err := NewHolder(good, reg); err != nil {
		t.Fatal(err)
	}
	var are prometheus.AlreadyRegisteredError
	if _, err := NewHolder(good, reg); !errors.As(err, &are) {
		t.Errorf("second registration: %v", err)
	}
}

// startWatch runs h.Watch until the test ends and waits until it watches.
func startWatch(t *testing.T, h *Holder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.watchReady = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Watch(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	<-h.watchReady
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestWatchSignal(t *testing.T) {
	path := writeConfig(t, "broker.yaml", configFor("team-a"))
	sigs := make(chan os.Signal, 1)
	// File events must not be what triggers this reload.
	h, err := NewHolder(path, nil, WithSignals(sigs), WithDebounce(time.Hour), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, h)
	if err := os.WriteFile(path, []byte(configFor("team-a", "team-b")), 0o600); err != nil {
		t.Fatal(err)
	}
	sigs <- syscall.SIGHUP
	waitFor(t, "team-b after SIGHUP", func() bool { return hasTenant(h, "team-b") })
}

func TestWatchFileReplaced(t *testing.T) {
	path := writeConfig(t, "broker.yaml", configFor("team-a"))
	reg := prometheus.NewRegistry()
	h, err := NewHolder(path, reg, WithSignals(make(chan os.Signal)), WithDebounce(20*time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, h)

	replaceFile(t, path, configFor("team-a", "team-b"))
	waitFor(t, "team-b after rename over the file", func() bool { return hasTenant(h, "team-b") })

	// An invalid file is refused and counted; the configuration stays.
	replaceFile(t, path, "version: 1\ntenants: nope\n")
	waitFor(t, "a counted reload failure", func() bool {
		return metric(t, reg, "retrybroker_config_reload_failures_total", "") == 1
	})
	if !hasTenant(h, "team-b") {
		t.Fatal("invalid file replaced the configuration")
	}

	// Writing in place is seen too.
	if err := os.WriteFile(path, []byte(configFor("team-c")), 0o600); err != nil {
		t.Fatal(err)
	}
	// (A reload may catch the file half-written and fail; the next event
	// reloads the complete file.)
	waitFor(t, "team-c after an in-place write", func() bool { return hasTenant(h, "team-c") && !hasTenant(h, "team-a") })
}

// TestWatchConfigMapSwap mimics a Kubernetes ConfigMap volume: the file is
// a symlink through "..data", which is swapped atomically on update.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	mkVersion := func(name, body string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "broker.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mkVersion("..2024_01", configFor("team-a"))
	if err := os.Symlink("..2024_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "broker.yaml")
	if err := os.Symlink(filepath.Join("..data", "broker.yaml"), path); err != nil {
		t.Fatal(err)
	}
	h, err := NewHolder(path, nil, WithSignals(make(chan os.Signal)), WithDebounce(20*time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, h)

	mkVersion("..2024_02", configFor("team-a", "team-b"))
	if err := os.Symlink("..2024_02", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2024_01")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "team-b after the ..data swap", func() bool { return hasTenant(h, "team-b") })
}

// TestWatchIgnoresOtherFiles checks that unrelated files in the directory
// do not cause reloads.
func TestWatchIgnoresOtherFiles(t *testing.T) {
	path := writeConfig(t, "broker.yaml", configFor("team-a"))
	reg := prometheus.NewRegistry()
	h, err := NewHolder(path, reg, WithSignals(make(chan os.Signal)), WithDebounce(time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, h)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "other.yaml"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Touching the config without changing it does not reload either.
	replaceFile(t, path, configFor("team-a"))
	// Then a real change, which must be the only reload.
	replaceFile(t, path, configFor("team-a", "team-b"))
	waitFor(t, "team-b", func() bool { return hasTenant(h, "team-b") })
	if got := metric(t, reg, "retrybroker_config_reloads_total", "success"); got != 1 {
		t.Errorf("reloads = %v, want 1", got)
	}
}

func TestWatchStopsWithContext(t *testing.T) {
	path := writeConfig(t, "broker.yaml", configFor("team-a"))
	h, err := NewHolder(path, nil, WithSignals(make(chan os.Signal)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Watch(ctx)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
}
