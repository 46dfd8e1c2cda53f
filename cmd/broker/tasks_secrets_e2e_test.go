package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// waitTaskFinal polls GetTask until the task is final, within a bound
// generous for a loaded machine (River's scheduler moves due jobs every
// few seconds).
func waitTaskFinal(ctx context.Context, t *testing.T, b *brokerProc, id string) *rbv1.Task {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		task, err := b.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: id})
		if err != nil {
			t.Fatal(err)
		}
		switch task.GetState() {
		case rbv1.TaskState_TASK_STATE_SUCCEEDED, rbv1.TaskState_TASK_STATE_FAILED, rbv1.TaskState_TASK_STATE_CANCELLED:
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after 60s", id, task.GetState())
		}
	}
}

// fileBytes is the SQLite file and its WAL, where fresh pages live.
func fileBytes(t *testing.T, db string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if len(all) == 0 {
		t.Fatal("no database file")
	}
	return all
}

// stopProc stops a broker with SIGTERM (it resigns River's leadership, so
// the next one need not wait out a lease) and waits for it, bounded.
func stopProc(t *testing.T, b *brokerProc) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.done:
		b.done <- err // for the cleanup, which waits for it
	case <-time.After(60 * time.Second):
		t.Fatal("the broker did not stop within 60s of SIGTERM")
	}
}

// TestTaskSecretsAtRest: through real broker processes with
// --tasks-key-file, a task carrying Authorization and X-Api-Key is stored
// with neither value in the SQLite file (nor its WAL), the upstream
// receives both as sent, and no answer or log line holds them. After a
// key rotation (a new key first, the old one kept) a task sealed by the
// old key still runs (RetryTask of a FAILED one) and new tasks are sealed
// by the new key; once the old key is removed such a task fails without
// a send, the broker's log naming the key and no secret. A bad key file
// stops the broker at start without echoing the file.
func TestTaskSecretsAtRest(t *testing.T) {
	const bearer, apiKey = "Bearer e2e-s3cret-bearer-7f3a", "e2e-api-k3y-91c2"
	var mu sync.Mutex
	var got []string
	seen := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		seen[r.URL.Path]++
		first := seen[r.URL.Path] == 1
		mu.Unlock()
		if first && strings.HasPrefix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusBadRequest) // not retryable: the task fails
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	oldKey := "old:" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	newKey := "new:" + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	keyFile := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := func(keys string) []string {
		return []string{"--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", db, "--tasks-key-file", keys}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	create := func(b *brokerProc, id string) *rbv1.Task {
		t.Helper()
		task, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
			TaskId: id,
			Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "POST", Url: up.URL + "/" + id, Headers: []*rbv1.HttpHeader{
				{Name: "Authorization", Value: bearer}, {Name: "x-api-key", Value: apiKey},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	noSecret := func(what string, b []byte) {
		t.Helper()
		for _, s := range []string{bearer, apiKey, "e2e-s3cret", "e2e-api-k3y"} {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("%s holds the secret %q", what, s)
			}
		}
	}
	final := func(b *brokerProc, id string, want rbv1.TaskState) *rbv1.Task {
		t.Helper()
		task := waitTaskFinal(ctx, t, b, id)
		if task.GetState() != want {
			t.Fatalf("task %s: %s (outcome %s), want %s", id, task.GetState(), task.GetOutcome(), want)
		}
		answer, _ := proto.Marshal(task)
		noSecret("the GetTask answer", answer)
		return task
	}
	sends := func(path string) []string {
		var out []string
		for _, r := range received() {
			if p, v, _ := strings.Cut(r, " "); p == path {
				out = append(out, v)
			}
		}
		return out
	}
	want := bearer + "|" + apiKey

	// 1. Sealed at rest, opened at dispatch: the upstream gets them as sent.
	first := startProc(t, args(keyFile("keys1", oldKey))...)
	for _, id := range []string{"now", "fail1", "fail2"} {
		answer, _ := proto.Marshal(create(first, id))
		noSecret("the CreateTask answer", answer)
	}
	final(first, "now", rbv1.TaskState_TASK_STATE_SUCCEEDED)
	final(first, "fail1", rbv1.TaskState_TASK_STATE_FAILED)
	final(first, "fail2", rbv1.TaskState_TASK_STATE_FAILED)
	for _, path := range []string{"/now", "/fail1", "/fail2"} {
		if s := sends(path); len(s) != 1 || s[0] != want {
			t.Fatalf("%s: the upstream received %q, want one send with the headers as sent", path, s)
		}
	}
	list, err := first.client.ListTasks(ctx, &rbv1.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proto.Marshal(list)
	noSecret("the ListTasks answer", b)
	noSecret("the SQLite file", fileBytes(t, db))
	stopProc(t, first)
	noSecret("the SQLite file", fileBytes(t, db))
	noSecret("the broker's log", []byte(first.logs.String()))

	// 2. Rotation: the new key first, the old one kept.
	second := startProc(t, args(keyFile("keys2", newKey, oldKey))...)
	if _, err := second.client.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: "fail1"}); err != nil {
		t.Fatal(err)
	}
	final(second, "fail1", rbv1.TaskState_TASK_STATE_SUCCEEDED)
	if s := sends("/fail1"); len(s) != 2 || s[1] != want {
		t.Fatalf("an old key's task after the rotation: the upstream received %q", s)
	}
	create(second, "rotated")
	final(second, "rotated", rbv1.TaskState_TASK_STATE_SUCCEEDED)
	stopProc(t, second)
	all := fileBytes(t, db)
	noSecret("the SQLite file", all)
	if !bytes.Contains(all, []byte("\x00rbseal1:new:")) {
		t.Fatal("no value in the file is sealed by the new key")
	}
	noSecret("the broker's log", []byte(second.logs.String()))

	// 3. The old key removed: its task fails at dispatch, nothing is sent.
	third := startProc(t, args(keyFile("keys3", newKey))...)
	if _, err := third.client.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: "fail2"}); err != nil {
		t.Fatal(err)
	}
	final(third, "fail2", rbv1.TaskState_TASK_STATE_FAILED)
	if s := sends("/fail2"); len(s) != 1 {
		t.Fatalf("a task whose key is gone was sent: %q", s)
	}
	logs := third.logs.String()
	if !strings.Contains(logs, "task secrets do not open") || !strings.Contains(logs, "old") || !strings.Contains(logs, "no longer holds") {
		t.Fatalf("the broker's log does not say why the task failed:\n%s", logs)
	}
	noSecret("the broker's log", []byte(logs))
	stopProc(t, third)

	// 4. Bad key files stop the broker at start, naming the line only.
	shortKey := base64.StdEncoding.EncodeToString([]byte("e2e-s3cret-short"))
	for name, lines := range map[string][]string{"short": {"a:" + shortKey}, "empty": {"# none"}, "bare key": {shortKey}} {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(cctx, brokerBin, append([]string{"--listen", freePort(t)}, args(keyFile("bad-"+name, lines...))...)...).CombinedOutput()
		ccancel()
		if err == nil || !strings.Contains(string(out), "--tasks-key-file") {
			t.Fatalf("bad key file %s: %v\n%s", name, err, out)
		}
		if strings.Contains(string(out), shortKey) {
			t.Fatalf("the start error repeats the key: %s", out)
		}
	}
}

// TestTaskBoundFlags: a real broker enforces --tasks-max-pending-per-tenant
// (RESOURCE_EXHAUSTED naming the flag), and refuses at start task flags
// out of range or a key file without task storage.
func TestTaskBoundFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks-max-response-body", "0"}, "--tasks-max-response-body"},
		{[]string{"--tasks-max-pending-per-tenant", "0"}, "--tasks-max-pending-per-tenant"},
		{[]string{"--tasks-retention", "-1s"}, "--tasks-retention"},
		{[]string{"--tasks-key-file", filepath.Join(t.TempDir(), "keys")}, "needs task storage"},
	} {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(cctx, brokerBin, append([]string{"--listen", freePort(t)}, c.args...)...).CombinedOutput()
		ccancel()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
	}
	b := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(t.TempDir(), "tasks.db"), "--tasks-max-pending-per-tenant", "1")
	req := func(id string) *rbv1.CreateTaskRequest {
		return &rbv1.CreateTaskRequest{
			TaskId: id, NotBefore: timestamppb.New(time.Now().Add(time.Hour)),
			Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}},
		}
	}
	if _, err := b.client.CreateTask(ctx, req("one")); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.CreateTask(ctx, req("two"))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--tasks-max-pending-per-tenant") {
		t.Fatalf("past the bound: %v", err)
	}
	if _, err := b.client.CancelTask(ctx, &rbv1.CancelTaskRequest{TaskId: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateTask(ctx, req("two")); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
}
