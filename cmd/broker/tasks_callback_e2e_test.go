package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// e2eCallbackSecret is a Standard Webhooks secret (whsec_ and the base64
// of 24 bytes).
const e2eCallbackSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// webhookReceiver is a loopback receiver that checks each POST as the
// Standard Webhooks specification tells a receiver to (HMAC-SHA256 with
// the base64-decoded secret over "id.timestamp.body", any "v1," signature
// of the space-separated list) and keeps the verified bodies.
type webhookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	ids    []string
	bad    []string
}

func newWebhookReceiver(t *testing.T, secret string) *webhookReceiver {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	rc := &webhookReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		want := mac.Sum(nil)
		ok := false
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			if v, enc, _ := strings.Cut(sig, ","); v == "v1" {
				got, err := base64.StdEncoding.DecodeString(enc)
				ok = ok || (err == nil && hmac.Equal(got, want))
			}
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if !ok {
			rc.bad = append(rc.bad, id)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rc.bodies, rc.ids = append(rc.bodies, body), append(rc.ids, id)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *webhookReceiver) got() (bodies [][]byte, ids, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.bodies...), append([]string(nil), rc.ids...), append([]string(nil), rc.bad...)
}

func waitTask(ctx context.Context, t *testing.T, b *brokerProc, id string, within time.Duration, cond func(*rbv1.Task) bool) *rbv1.Task {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		task, err := b.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: id})
		if err != nil {
			t.Fatal(err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %v after %s", id, task, within)
		}
	}
}

// TestTaskCallbackE2E: through a real broker with
// --tasks-callback-secret-file, a task's final state is POSTed to a
// loopback receiver that verifies the signature from the specification,
// as the Task's protobuf JSON, and the task shows the delivery; a bad
// callback URL is INVALID_ARGUMENT; a broker without the secret refuses a
// callback with FAILED_PRECONDITION.
func TestTaskCallbackE2E(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") }))
	t.Cleanup(up.Close)
	rc := newWebhookReceiver(t, e2eCallbackSecret)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "callback-secret")
	if err := os.WriteFile(secretFile, []byte(e2eCallbackSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(dir, "tasks.db"), "--tasks-callback-secret-file", secretFile)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	exec := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/job"}}
	if _, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{Execute: exec, Callback: &rbv1.TaskCallback{Url: "ftp://127.0.0.1/"}}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "callback.url") {
		t.Fatalf("bad callback url: %v", err)
	}
	created, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{TaskId: "cb", Execute: exec, Callback: &rbv1.TaskCallback{Url: rc.URL + "/hook"}})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetCallbackState() != rbv1.TaskCallbackState_TASK_CALLBACK_STATE_AWAITING_TASK {
		t.Fatalf("created with callback state %s", created.GetCallbackState())
	}
	done := waitTask(ctx, t, b, "cb", 60*time.Second, func(task *rbv1.Task) bool {
		return task.GetCallbackState() == rbv1.TaskCallbackState_TASK_CALLBACK_STATE_DELIVERED ||
			task.GetCallbackState() == rbv1.TaskCallbackState_TASK_CALLBACK_STATE_FAILED
	})
	if done.GetCallbackState() != rbv1.TaskCallbackState_TASK_CALLBACK_STATE_DELIVERED || done.GetCallbackAttempts() != 1 || done.GetCallbackLastError() != "" {
		t.Fatalf("callback %s after %d tries (%q)", done.GetCallbackState(), done.GetCallbackAttempts(), done.GetCallbackLastError())
	}
	bodies, ids, bad := rc.got()
	if len(bad) != 0 || len(bodies) != 1 {
		t.Fatalf("receiver: %d verified, %d failed verification", len(bodies), len(bad))
	}
	var sent rbv1.Task
	if err := protojson.Unmarshal(bodies[0], &sent); err != nil {
		t.Fatalf("the callback body is not a Task's JSON: %v\n%s", err, bodies[0])
	}
	if sent.GetTaskId() != "cb" || sent.GetState() != rbv1.TaskState_TASK_STATE_SUCCEEDED || string(sent.GetResponse().GetBody()) != "done" ||
		sent.GetIdempotencyKey() != created.GetIdempotencyKey() || !strings.HasPrefix(ids[0], "msg_") {
		t.Fatalf("callback body %v, id %q", &sent, ids[0])
	}

	off := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(dir, "other.db"))
	_, err = off.client.CreateTask(ctx, &rbv1.CreateTaskRequest{Execute: exec, Callback: &rbv1.TaskCallback{Url: rc.URL}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--tasks-callback-secret-file") {
		t.Fatalf("callback without a secret: %v", err)
	}
}

// TestTaskDispatchSpanLinkedAcrossRestart: a task created on one broker
// process (its CreateTask call in a trace the caller started) and
// dispatched by another, after the first is killed, is exported by the
// second as a task.dispatch span that links to the caller's trace: the
// second process's exports carry the caller's trace id, which only the
// stored trace context can have given it (the dispatch is a new root).
func TestTaskDispatchSpanLinkedAcrossRestart(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	db := filepath.Join(t.TempDir(), "tasks.db")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	firstCol := newOTLPCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", firstCol.URL)
	first := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", db)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if _, err := first.client.CreateTask(cctx, &rbv1.CreateTaskRequest{
		// Due after the kill and more than River's scheduler interval (5 s)
		// away, so the first broker never touches its job: a job a killed
		// broker left running is not rescued (docs/tasks.md, Known limits).
		TaskId: "traced", NotBefore: timestamppb.New(time.Now().Add(8 * time.Second)),
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}},
	}); err != nil {
		t.Fatal(err)
	}
	rawID, _ := hex.DecodeString(traceID)
	waitUntil(t, 15*time.Second, "the CreateTask span exported", func() bool { return strings.Contains(firstCol.text(), string(rawID)) })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-first.done
	first.done <- err

	secondCol := newOTLPCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", secondCol.URL)
	second := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", db)
	waitTask(ctx, t, second, "traced", 60*time.Second, func(task *rbv1.Task) bool { return task.GetState() == rbv1.TaskState_TASK_STATE_SUCCEEDED })
	waitUntil(t, 15*time.Second, "the dispatch span exported", func() bool { return strings.Contains(secondCol.text(), "task.dispatch") })
	if !strings.Contains(secondCol.text(), string(rawID)) {
		t.Fatal("the second broker's task.dispatch span does not link to the CreateTask call's trace")
	}
}

// TestTaskCallbackSurvivesSIGKILL: a callback whose first try failed (the
// receiver answered 503) is delivered by a new broker on the same
// --tasks-sqlite file after the first was killed with SIGKILL right after
// the try, with the same webhook-id. The kill may land before River
// recorded the try's end (River completes jobs asynchronously): the job is
// then left running, and the new broker's River rescues it (30 s after the
// try began, at its rescuer's next run, every 30 s, once it leads).
func TestTaskCallbackSurvivesSIGKILL(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	var mu sync.Mutex
	var ids []string
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		first := len(ids) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "callback-secret")
	if err := os.WriteFile(secretFile, []byte(e2eCallbackSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(dir, "tasks.db"), "--tasks-callback-secret-file", secretFile}
	first := startProc(t, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if _, err := first.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId: "k", Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}}, Callback: &rbv1.TaskCallback{Url: rc.URL},
	}); err != nil {
		t.Fatal(err)
	}
	pending := waitTask(ctx, t, first, "k", 60*time.Second, func(task *rbv1.Task) bool { return task.GetCallbackAttempts() >= 1 })
	if pending.GetCallbackState() != rbv1.TaskCallbackState_TASK_CALLBACK_STATE_PENDING || pending.GetCallbackLastError() != "the receiver answered 503" {
		t.Fatalf("after the 503: callback %s (%q)", pending.GetCallbackState(), pending.GetCallbackLastError())
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-first.done
	first.done <- err

	second := startProc(t, args...)
	done := waitTask(ctx, t, second, "k", 150*time.Second, func(task *rbv1.Task) bool {
		return task.GetCallbackState() == rbv1.TaskCallbackState_TASK_CALLBACK_STATE_DELIVERED ||
			task.GetCallbackState() == rbv1.TaskCallbackState_TASK_CALLBACK_STATE_FAILED
	})
	if done.GetCallbackState() != rbv1.TaskCallbackState_TASK_CALLBACK_STATE_DELIVERED || done.GetCallbackAttempts() != 2 {
		t.Fatalf("after the restart: callback %s after %d tries (%q)", done.GetCallbackState(), done.GetCallbackAttempts(), done.GetCallbackLastError())
	}
	if got := seen(); len(got) != 2 || got[0] != got[1] || got[0] == "" {
		t.Fatalf("receiver saw ids %q, want the same id twice", got)
	}
}
