package tasks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// testSecret is a Standard Webhooks secret: whsec_ and the base64 of 32
// bytes.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// delivery is what the callback receiver saw of one POST.
type delivery struct {
	id, timestamp, signature, contentType string
	traceparent                           string
	body                                  []byte
}

// receiver is a loopback callback receiver answering from a script of
// statuses (the last repeats).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []delivery
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	rc := &receiver{statuses: statuses}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		status := rc.statuses[min(len(rc.got), len(rc.statuses)-1)]
		rc.got = append(rc.got, delivery{
			id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"),
			signature: r.Header.Get("webhook-signature"), contentType: r.Header.Get("Content-Type"),
			traceparent: r.Header.Get("traceparent"), body: body,
		})
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// verifyStandardWebhook checks d as the Standard Webhooks specification
// tells a receiver to, written from the specification and not from the
// broker's Sign: the key is the base64 after "whsec_"; the signed content
// is "webhook-id.webhook-timestamp.body"; webhook-signature is a
// space-separated list of "v1,<base64 HMAC-SHA256>", any one of which
// must match; and the timestamp must be within 5 minutes of now.
func verifyStandardWebhook(t *testing.T, secret string, d delivery) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := strconv.ParseInt(d.timestamp, 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q: %v", d.timestamp, err)
	}
	if skew := time.Since(time.Unix(ts, 0)); skew > 5*time.Minute || skew < -5*time.Minute {
		t.Fatalf("webhook-timestamp %d is %s from now", ts, skew)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.id + "." + d.timestamp + "." + string(d.body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(d.signature) {
		version, enc, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(enc)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return
		}
	}
	t.Fatalf("webhook-signature %q does not verify for id %q, timestamp %q", d.signature, d.id, d.timestamp)
}

// guardedPrepare is prepareWith with the broker's guarded client: allow
// lists the ranges the policy may reach (empty: the default rules, which
// refuse loopback).
func guardedPrepare(t *testing.T, p *engine.Policy, allow ...netip.Prefix) tasks.Prepare {
	t.Helper()
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	rules, err := egress.NewRules(egress.RulesConfig{AllowPrefixes: allow})
	if err != nil {
		t.Fatal(err)
	}
	client, err := clients.For(rules)
	if err != nil {
		t.Fatal(err)
	}
	base := prepareWith(t, p)
	return func(ctx context.Context, tenant, id string, raw []byte) (*engine.Call, error) {
		call, err := base(ctx, tenant, id, raw)
		if err != nil {
			return nil, err
		}
		call.Client = client
		return call, nil
	}
}

var loopback = netip.MustParsePrefix("127.0.0.0/8")

func callbackSecret(t *testing.T, lines string) *tasks.CallbackSecret {
	t.Helper()
	path := filepath.Join(t.TempDir(), "callback-secret")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	sec, err := tasks.NewCallbackSecret(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// taskJSON is the test's callback body (the server sends the Task proto's
// JSON; the package takes any encoder).
func taskJSON(task *tasks.Task) ([]byte, error) {
	return json.Marshal(map[string]any{
		"task_id": task.ID, "state": task.State.String(), "attempts": len(task.Attempts),
		"callback_attempts": task.CallbackAttempts, "update_time": task.UpdateTime,
	})
}

func openCallbacks(t *testing.T, path string, prepare tasks.Prepare, sec *tasks.CallbackSecret, opts ...tasks.Option) *tasks.RiverStore {
	t.Helper()
	opts = append([]tasks.Option{
		tasks.WithPollInterval(50 * time.Millisecond),
		tasks.WithCallbacks(tasks.Callbacks{Secret: sec, Body: taskJSON, BaseDelay: 10 * time.Millisecond}),
	}, opts...)
	s, err := tasks.OpenSQLite(t.Context(), path, engine.NewRunner(memstore.New()), prepare, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

func callbackSettled(task *tasks.Task) bool {
	return task.Callback == tasks.CallbackDelivered || task.Callback == tasks.CallbackFailed
}

// TestCallbackSignedDelivery: a task that succeeds POSTs its final state
// once to the receiver, with Standard Webhooks headers that an independent
// check written from the specification verifies, and the delivery is
// visible on the task.
func TestCallbackSignedDelivery(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 204)
	p := policy(t, nil)
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret+"\n"))
	created, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "cb", Request: request(t, "POST", up.URL), CallbackURL: rc.URL + "/hook?x=1"})
	if err != nil {
		t.Fatal(err)
	}
	if created.Callback != tasks.CallbackAwaitingTask {
		t.Fatalf("a new task's callback is %s, want awaiting_task", created.Callback)
	}
	done := waitFor(t, s, "a", "cb", callbackSettled)
	if done.State != tasks.StateSucceeded || done.Callback != tasks.CallbackDelivered || done.CallbackAttempts != 1 || done.CallbackError != "" {
		t.Fatalf("task %s, callback %s after %d tries (%q)", done.State, done.Callback, done.CallbackAttempts, done.CallbackError)
	}
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d deliveries, want 1", len(got))
	}
	d := got[0]
	if !strings.HasPrefix(d.id, "msg_") || d.contentType != "application/json" {
		t.Fatalf("webhook-id %q, content type %q", d.id, d.contentType)
	}
	verifyStandardWebhook(t, testSecret, d)
	var body map[string]any
	if err := json.Unmarshal(d.body, &body); err != nil || body["task_id"] != "cb" || body["state"] != "succeeded" {
		t.Fatalf("body %s (%v)", d.body, err)
	}
}

// TestCallbackRetriedWithSameID: a receiver that answers 500 and then 200
// gets the callback twice, with the same webhook-id (so it can dedupe)
// and the same body, each signed; the task shows the failed try and then
// the delivery.
func TestCallbackRetriedWithSameID(t *testing.T) {
	up := newUpstream(t, reply{status: 400}) // a failed task calls back too
	rc := newReceiver(t, 500, 200)
	p := policy(t, nil)
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "r", Request: request(t, "GET", up.URL), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	pending := waitFor(t, s, "a", "r", func(task *tasks.Task) bool { return task.CallbackAttempts >= 1 })
	if pending.Callback != tasks.CallbackPending && pending.Callback != tasks.CallbackDelivered {
		t.Fatalf("after the 500 the callback is %s", pending.Callback)
	}
	if pending.Callback == tasks.CallbackPending && pending.CallbackError != "the receiver answered 500" {
		t.Fatalf("after the 500 the callback error is %q", pending.CallbackError)
	}
	done := waitFor(t, s, "a", "r", callbackSettled)
	if done.State != tasks.StateFailed || done.Callback != tasks.CallbackDelivered || done.CallbackAttempts != 2 || done.CallbackError != "" {
		t.Fatalf("task %s, callback %s after %d tries (%q)", done.State, done.Callback, done.CallbackAttempts, done.CallbackError)
	}
	got := rc.deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d deliveries, want 2", len(got))
	}
	if got[0].id == "" || got[0].id != got[1].id || string(got[0].body) != string(got[1].body) {
		t.Fatalf("the two tries differ: ids %q, %q; bodies %s, %s", got[0].id, got[1].id, got[0].body, got[1].body)
	}
	for _, d := range got {
		verifyStandardWebhook(t, testSecret, d)
	}
}

// TestCallbackSpanPerTry: each try of a callback is a task.callback span
// (a client span, a new root linked to the CreateTask call's span, as a
// dispatch's is) that says which try it was, how it went and the
// receiver's status, with an error status for the failed try; each try's
// W3C trace context reaches the receiver, so a receiver that traces can
// join the try's trace. Nothing on the spans names the callback URL's
// path or query (a receiver's token) or the signature.
func TestCallbackSpanPerTry(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 500, 200)
	p := policy(t, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret),
		tasks.WithTracer(tp.Tracer("tasks")))
	cctx, createSpan := tp.Tracer("test").Start(t.Context(), "CreateTask")
	const token = "s3cret-receiver-token"
	if _, _, err := s.Create(cctx, tasks.NewTask{Tenant: "a", ID: "sp", Request: request(t, "GET", up.URL), CallbackURL: rc.URL + "/hook/" + token + "?token=" + token}); err != nil {
		t.Fatal(err)
	}
	createSpan.End()
	done := waitFor(t, s, "a", "sp", callbackSettled)
	if done.Callback != tasks.CallbackDelivered || done.CallbackAttempts != 2 {
		t.Fatalf("callback %s after %d tries, want delivered after 2", done.Callback, done.CallbackAttempts)
	}
	var spans []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); len(spans) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d task.callback spans ended, want 2", len(spans))
		}
		spans = spans[:0]
		for _, sp := range rec.Ended() {
			if sp.Name() == "task.callback" {
				spans = append(spans, sp)
			}
		}
	}
	if len(spans) != 2 {
		t.Fatalf("%d task.callback spans, want 2", len(spans))
	}
	attrs := func(sp sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range sp.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int {
		return strings.Compare(attrs(a)["retrybroker.task.callback.try"], attrs(b)["retrybroker.task.callback.try"])
	})
	got := rc.deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d deliveries, want 2", len(got))
	}
	port := rc.Listener.Addr().(*net.TCPAddr).Port
	want := createSpan.SpanContext()
	for i, c := range []struct {
		result, status string
		code           codes.Code
	}{{"retry", "500", codes.Error}, {"delivered", "200", codes.Unset}} {
		sp, a := spans[i], attrs(spans[i])
		if sp.SpanKind() != trace.SpanKindClient || sp.Parent().IsValid() || sp.SpanContext().TraceID() == want.TraceID() {
			t.Fatalf("try %d: kind %v, parent %v, trace %s: want a new root client span", i+1, sp.SpanKind(), sp.Parent(), sp.SpanContext().TraceID())
		}
		if links := sp.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != want.SpanID() || links[0].SpanContext.TraceID() != want.TraceID() {
			t.Fatalf("try %d links %+v, want the create span", i+1, links)
		}
		if a["retrybroker.task.callback.try"] != strconv.Itoa(i+1) || a["retrybroker.task.callback.result"] != c.result ||
			a["http.response.status_code"] != c.status || a["retrybroker.task.id"] != "sp" || a["retrybroker.tenant"] != "a" ||
			a["http.request.method"] != "POST" || a["server.address"] != "127.0.0.1" || a["server.port"] != strconv.Itoa(port) {
			t.Fatalf("try %d attributes %v", i+1, a)
		}
		if sp.Status().Code != c.code {
			t.Fatalf("try %d status %+v, want %v", i+1, sp.Status(), c.code)
		}
		if c.code == codes.Error && sp.Status().Description != "the receiver answered 500" {
			t.Fatalf("try %d status description %q", i+1, sp.Status().Description)
		}
		wantTP := fmt.Sprintf("00-%s-%s-01", sp.SpanContext().TraceID(), sp.SpanContext().SpanID())
		if got[i].traceparent != wantTP {
			t.Fatalf("try %d: the receiver got traceparent %q, want the try's span %q", i+1, got[i].traceparent, wantTP)
		}
		for k, v := range a {
			if strings.Contains(v, token) || strings.Contains(v, "/hook") || strings.Contains(v, got[i].signature) {
				t.Fatalf("try %d: attribute %s = %q names the URL's path or query, or the signature", i+1, k, v)
			}
		}
		if strings.Contains(sp.Status().Description, token) {
			t.Fatalf("try %d: status %q names the token", i+1, sp.Status().Description)
		}
	}
}

// TestCallbackRefusedDestinationNeverDialled: under rules that do not
// allow loopback, the callback to a loopback receiver is refused by the
// destination guard: the task records the refusal as a failed callback
// after one try, and the receiver is never reached (nor is any other
// address: the guard refuses before dialling).
func TestCallbackRefusedDestinationNeverDialled(t *testing.T) {
	rc := newReceiver(t, 200)
	p := policy(t, nil)
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p), callbackSecret(t, testSecret))
	// The task's own call is refused too (the same rules), which fails it;
	// a failed task calls back.
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "x", Request: request(t, "GET", rc.URL+"/call"), CallbackURL: rc.URL + "/hook"}); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, s, "a", "x", callbackSettled)
	if done.State != tasks.StateFailed || done.Callback != tasks.CallbackFailed || done.CallbackAttempts != 1 {
		t.Fatalf("task %s, callback %s after %d tries (%q)", done.State, done.Callback, done.CallbackAttempts, done.CallbackError)
	}
	if !strings.Contains(done.CallbackError, "refused") || !strings.Contains(done.CallbackError, "loopback") {
		t.Fatalf("callback error %q does not say the guard refused loopback", done.CallbackError)
	}
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the refused receiver was reached %d times", n)
	}
}

// TestCallbackSurvivesRestart: a callback whose first try failed is
// delivered by the next broker on the same file, with the same
// webhook-id.
func TestCallbackSurvivesRestart(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 503, 200)
	p := policy(t, nil)
	path := filepath.Join(t.TempDir(), "tasks.db")
	prep := guardedPrepare(t, p, loopback)
	sec := callbackSecret(t, testSecret)
	// A long first backoff keeps the retry for the second store.
	first, err := tasks.OpenSQLite(t.Context(), path, engine.NewRunner(memstore.New()), prep,
		tasks.WithPollInterval(50*time.Millisecond), tasks.WithCallbacks(tasks.Callbacks{Secret: sec, Body: taskJSON, BaseDelay: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "s", Request: request(t, "GET", up.URL), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, first, "a", "s", func(task *tasks.Task) bool { return task.CallbackAttempts >= 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.deliveries()); n != 1 {
		t.Fatalf("before the restart the receiver got %d deliveries, want 1", n)
	}
	s := openCallbacks(t, path, prep, sec)
	done := waitFor(t, s, "a", "s", callbackSettled)
	if done.Callback != tasks.CallbackDelivered || done.CallbackAttempts != 2 {
		t.Fatalf("after the restart: callback %s after %d tries (%q)", done.Callback, done.CallbackAttempts, done.CallbackError)
	}
	got := rc.deliveries()
	if len(got) != 2 || got[0].id != got[1].id {
		t.Fatalf("deliveries %d, ids %v", len(got), got)
	}
	verifyStandardWebhook(t, testSecret, got[1])
}

// TestCallbackOnCancel: cancelling a task with a callback calls back with
// the CANCELLED state.
func TestCallbackOnCancel(t *testing.T) {
	rc := newReceiver(t, 200)
	p := policy(t, nil)
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "c", NotBefore: time.Now().Add(time.Hour), Request: request(t, "GET", "http://127.0.0.1:1/"), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(t.Context(), "a", "c"); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, s, "a", "c", callbackSettled)
	if done.State != tasks.StateCancelled || done.Callback != tasks.CallbackDelivered {
		t.Fatalf("task %s, callback %s (%q)", done.State, done.Callback, done.CallbackError)
	}
	got := rc.deliveries()
	if len(got) != 1 || !strings.Contains(string(got[0].body), `"state":"cancelled"`) {
		t.Fatalf("deliveries %+v", got)
	}
}

// TestSignMatchesSpecExample: Sign reproduces the example of the
// Standard Webhooks specification (secret, id, timestamp and body from
// its "Signature scheme" section).
func TestSignMatchesSpecExample(t *testing.T) {
	keys, err := tasks.ParseCallbackSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := tasks.Sign(keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %q, want the specification's %q", got, want)
	}
}

// TestParseCallbackSecrets: the file's lines must be whsec_ secrets of 24
// to 64 bytes; errors name the line, never the secret.
func TestParseCallbackSecrets(t *testing.T) {
	for _, tc := range []struct {
		text string
		keys int
		err  string
	}{
		{testSecret, 1, ""},
		{"\n" + testSecret + "\r\n\n" + testSecret + "\n", 2, ""},
		{"", 0, "no secret"},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0, "line 1: a secret starts with whsec_"},
		{"whsec_!!!", 0, "line 1: not standard base64"},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)), 0, "16 bytes"},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)), 0, "65 bytes"},
	} {
		keys, err := tasks.ParseCallbackSecrets(tc.text)
		if tc.err == "" {
			if err != nil || len(keys) != tc.keys {
				t.Errorf("%q: %d keys, %v", tc.text, len(keys), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "MfKQ9r8G") {
			t.Errorf("%q: the error repeats the secret: %v", tc.text, err)
		}
	}
}

// TestCallbackSecretReread: a changed secret file is re-read; a file
// rewritten with no valid secret keeps the last good one.
func TestCallbackSecretReread(t *testing.T) {
	clock := engine.NewFakeClock(time.Unix(1_700_000_000, 0))
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	var warned int
	sec, err := tasks.NewCallbackSecret(path, clock, func(string, ...any) { warned++ })
	if err != nil {
		t.Fatal(err)
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdefghijklmnopqrstuv"))
	if err := os.WriteFile(path, []byte(other+"\n"+testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, _ := sec.Keys(); len(keys) != 1 {
		t.Fatalf("before the check interval: %d keys, want the first file's 1", len(keys))
	}
	clock.Advance(tasks.CallbackSecretCheck)
	keys, _ := sec.Keys()
	if len(keys) != 2 || string(keys[0]) != "0123456789abcdefghijklmnopqrstuv" {
		t.Fatalf("after the change: %d keys", len(keys))
	}
	if err := os.WriteFile(path, []byte("not a secret, and longer than the last one was to change its size\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(tasks.CallbackSecretCheck)
	if keys, err := sec.Keys(); err != nil || len(keys) != 2 || warned != 1 {
		t.Fatalf("after a bad rewrite: %d keys, %v, %d warnings; want the last good 2 and one warning", len(keys), err, warned)
	}
}

// TestCallbackVerifiedByStandardWebhooksPython cross-checks the
// deliveries with an independent implementation: PyPI's standardwebhooks
// (the specification's own reference library), whose Webhook.verify
// checks the signature and the timestamp's tolerance. Optional: it runs
// only when STANDARDWEBHOOKS_PYTHON names a Python that has the library:
//
//	python3 -m venv /tmp/sw && /tmp/sw/bin/pip install standardwebhooks==1.1.0
//	STANDARDWEBHOOKS_PYTHON=/tmp/sw/bin/python go test -run StandardWebhooksPython ./internal/tasks/
//
// The deliveries reach a loopback receiver; Python reads them from a file.
func TestCallbackVerifiedByStandardWebhooksPython(t *testing.T) {
	py := os.Getenv("STANDARDWEBHOOKS_PYTHON")
	if py == "" {
		t.Skip("STANDARDWEBHOOKS_PYTHON is not set")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", "import standardwebhooks").CombinedOutput(); err != nil {
		t.Skipf("%s has no standardwebhooks: %v %s", py, err, out)
	}
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 200)
	p := policy(t, nil)
	// Two secrets: a rotation, where the library must accept one of the
	// two signatures.
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes......"))
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, other+"\n"+testSecret+"\n"))
	for _, id := range []string{"p1", "p2"} {
		if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: id, Request: request(t, "POST", up.URL), CallbackURL: rc.URL}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, s, "a", "p1", callbackSettled)
	waitFor(t, s, "a", "p2", callbackSettled)
	type pyCase struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	var cases []pyCase
	for _, d := range rc.deliveries() {
		cases = append(cases, pyCase{Headers: map[string]string{"webhook-id": d.id, "webhook-timestamp": d.timestamp, "webhook-signature": d.signature}, Body: base64.StdEncoding.EncodeToString(d.body)})
	}
	if len(cases) != 2 {
		t.Fatalf("%d deliveries, want 2", len(cases))
	}
	// A tampered body must fail, or the check proves nothing.
	bad := cases[0]
	bad.Body = base64.StdEncoding.EncodeToString([]byte(`{"task_id":"forged"}`))
	in, _ := json.Marshal(append(cases, bad))
	file := filepath.Join(t.TempDir(), "deliveries.json")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `
import base64, json, sys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
cases = json.load(open(sys.argv[1]))
for secret in sys.argv[2:]:
    wh = Webhook(secret)
    out = []
    for c in cases:
        try:
            wh.verify(base64.b64decode(c["body"]), c["headers"])
            out.append("ok")
        except WebhookVerificationError:
            out.append("bad")
    print(" ".join(out))
`
	out, err := exec.CommandContext(ctx, py, "-c", script, file, testSecret, other).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "ok ok bad\nok ok bad" {
		t.Fatalf("standardwebhooks verified %q, want each secret to verify both deliveries and refuse the forged one", got)
	}
}

// TestCallbackAfterRetryTask: a FAILED task's callback is delivered; a
// RetryTask resets the callback to awaiting the task, and the next final
// state is a new event, delivered under a new webhook-id.
func TestCallbackAfterRetryTask(t *testing.T) {
	up := newUpstream(t, reply{status: 400}, reply{status: 200})
	rc := newReceiver(t, 200)
	p := policy(t, nil)
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "rt", Request: request(t, "GET", up.URL), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	if failed := waitFor(t, s, "a", "rt", callbackSettled); failed.State != tasks.StateFailed || failed.Callback != tasks.CallbackDelivered {
		t.Fatalf("first: task %s, callback %s", failed.State, failed.Callback)
	}
	retried, err := s.Retry(t.Context(), "a", "rt")
	if err != nil || retried.Callback != tasks.CallbackAwaitingTask || retried.CallbackAttempts != 0 {
		t.Fatalf("retry: %v, callback %s after %d tries", err, retried.Callback, retried.CallbackAttempts)
	}
	done := waitFor(t, s, "a", "rt", func(task *tasks.Task) bool { return task.State.Final() && callbackSettled(task) })
	if done.State != tasks.StateSucceeded || done.Callback != tasks.CallbackDelivered {
		t.Fatalf("after the retry: task %s, callback %s", done.State, done.Callback)
	}
	got := rc.deliveries()
	if len(got) != 2 || got[0].id == got[1].id || !strings.Contains(string(got[1].body), `"state":"succeeded"`) {
		t.Fatalf("deliveries %d, ids %q %q", len(got), got[0].id, got[len(got)-1].id)
	}
}

// FuzzParseCallbackSecrets: any file content is parsed without a panic;
// an accepted file holds only keys of 24 to 64 bytes, and an error never
// repeats the content.
func FuzzParseCallbackSecrets(f *testing.F) {
	for _, seed := range []string{testSecret, testSecret + "\n" + testSecret + "\r\n", "", "whsec_", "whsec_!!", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "\n\n  \n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		keys, err := tasks.ParseCallbackSecrets(text)
		if err != nil {
			if trimmed := strings.TrimSpace(text); len(trimmed) >= 8 && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("the error repeats the content: %v", err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("accepted with no key")
		}
		for _, k := range keys {
			if len(k) < 24 || len(k) > 64 {
				t.Fatalf("accepted a %d-byte key", len(k))
			}
		}
	})
}

// groundworkSchema is retrybroker_task as the first tasks broker made it,
// before callbacks and the trace context.
const groundworkSchema = `CREATE TABLE retrybroker_task (
	seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, task_id TEXT NOT NULL, policy TEXT NOT NULL,
	state INTEGER NOT NULL, not_before INTEGER NOT NULL, give_up_after INTEGER NOT NULL, create_time INTEGER NOT NULL,
	update_time INTEGER NOT NULL, next_run_time INTEGER NOT NULL, wait_reason TEXT NOT NULL, idempotency_key TEXT NOT NULL,
	dispatches INTEGER NOT NULL, outcome INTEGER NOT NULL, error TEXT NOT NULL, attempts BLOB NOT NULL, response BLOB,
	request BLOB NOT NULL, job_id INTEGER NOT NULL, UNIQUE (tenant, task_id))`

// TestOpenAddsCallbackColumnsToAnOlderTable: a file whose task table an
// older broker made (make run keeps it) is opened, its table gains the
// new columns, its stored task reads back, and a task with a callback
// runs and calls back.
func TestOpenAddsCallbackColumnsToAnOlderTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(groundworkSchema); err != nil {
		t.Fatal(err)
	}
	// Cancelled just now (an older time would be swept by retention at open).
	now := time.Now().UnixNano()
	if _, err := db.Exec(`INSERT INTO retrybroker_task VALUES (1, 'a', 'old', '', 6, ?, 0, ?, ?, ?, '', 'k', 0, 0, '', '[]', NULL, x'00', 0)`, now, now, now, now); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 200)
	s := openCallbacks(t, path, guardedPrepare(t, policy(t, nil), loopback), callbackSecret(t, testSecret))
	old, err := s.Get(t.Context(), "a", "old")
	if err != nil || old.State != tasks.StateCancelled || old.Callback != tasks.CallbackNone {
		t.Fatalf("the older task: %v %+v", err, old)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "new", Request: request(t, "GET", up.URL), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	if done := waitFor(t, s, "a", "new", callbackSettled); done.Callback != tasks.CallbackDelivered {
		t.Fatalf("callback %s (%q)", done.Callback, done.CallbackError)
	}
}
