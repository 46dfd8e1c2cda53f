package engine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reply is one canned upstream answer.
type reply struct {
	status int
	kv     []string
	body   string
	hangup bool // close the connection without answering
}

// upstream is a real HTTP server on loopback that answers the scripted
// replies in order (repeating the last) and records each arrival.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []reply
	arrivals []time.Time
	requests []*http.Request
	bodies   []string
}

func newUpstream(t *testing.T, replies ...reply) *upstream {
	t.Helper()
	u := &upstream{replies: replies}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		n := len(u.arrivals)
		u.arrivals = append(u.arrivals, time.Now())
		u.requests = append(u.requests, r.Clone(context.Background()))
		u.bodies = append(u.bodies, string(b))
		rep := u.replies[min(n, len(u.replies)-1)]
		u.mu.Unlock()
		if rep.hangup {
			hj, _ := w.(http.Hijacker)
			conn, _, err := hj.Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		for i := 0; i+1 < len(rep.kv); i += 2 {
			w.Header().Add(rep.kv[i], rep.kv[i+1])
		}
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.arrivals)
}

type fixture struct {
	runner *engine.Runner
	clock  engine.Clock
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newFixture(t *testing.T, clock engine.Clock, st store.Store) *fixture {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &fixture{
		runner: engine.NewRunner(st, engine.WithClock(clock), engine.WithTracer(tp.Tracer("test")), engine.WithRand(maxRand{})),
		clock:  clock, rec: rec, tp: tp,
	}
}

func newCall(t *testing.T, rawURL, method string, p *engine.Policy, provider string) *engine.Call {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	return &engine.Call{
		Policy: p, Provider: provider, Reader: p.ReaderFor(provider),
		Method: method, URL: u, Header: http.Header{}, RedactedURL: egress.RedactURL(u),
		Client: client, Classify: egress.Classify, Tenant: "t1",
	}
}

func TestRunSuccessAfter503s(t *testing.T) {
	up := newUpstream(t, reply{status: 503}, reply{status: 503}, reply{status: 200, body: "ok"})
	clock := engine.NewFakeClock(time.Now())
	f := newFixture(t, clock, nil)
	p := mustPolicy(t, nil)
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL+"/x", "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeSuccess || res.Response.Status != 200 || string(res.Response.Body) != "ok" {
		t.Fatalf("outcome %s status %d body %q", res.Outcome, res.Response.Status, res.Response.Body)
	}
	if len(res.Attempts) != 3 || up.count() != 3 {
		t.Fatalf("attempts %d, upstream saw %d; want 3", len(res.Attempts), up.count())
	}
	// Full jitter drawn at the top (maxRand): 1s then 2s.
	if got := clock.Sleeps(); len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Fatalf("sleeps %v, want [1s 2s]", got)
	}
	for i, a := range res.Attempts {
		if a.Number != i+1 {
			t.Errorf("attempt %d numbered %d", i+1, a.Number)
		}
	}
	if res.Attempts[1].Waited != time.Second {
		t.Errorf("attempt 2 waited %v, want 1s", res.Attempts[1].Waited)
	}
}

// TestRunHonoursProviderHintsExactly: one hint from each of the five seed
// providers, each honoured to the nanosecond on the (fake) clock.
func TestRunHonoursProviderHintsExactly(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		provider string
		first    reply
		want     time.Duration
		source   string
	}{
		{"retry-after", reply{status: 429, kv: []string{"Retry-After", "7"}}, 7 * time.Second, "retry-after"},
		{"azure", reply{status: 429, kv: []string{"x-ms-retry-after-ms", "1500"}}, 1500 * time.Millisecond, "x-ms-retry-after-ms"},
		{"aws", reply{status: 503, kv: []string{"x-amz-retry-after", "2500"}}, 2500 * time.Millisecond, "x-amz-retry-after"},
		{"github", reply{status: 403, kv: []string{"x-ratelimit-remaining", "0", "x-ratelimit-reset", strconv.FormatInt(start.Add(45*time.Second).Unix(), 10)}}, 45 * time.Second, "x-ratelimit-reset"},
		{"jira", reply{status: 429, kv: []string{"X-RateLimit-Reset", start.Add(30 * time.Second).Format(time.RFC3339)}}, 30 * time.Second, "x-ratelimit-reset"},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			up := newUpstream(t, tt.first, reply{status: 200})
			clock := engine.NewFakeClock(start)
			f := newFixture(t, clock, memstore.New())
			res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), tt.provider))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != engine.OutcomeSuccess || len(res.Attempts) != 2 {
				t.Fatalf("outcome %s after %d attempts", res.Outcome, len(res.Attempts))
			}
			d := res.Attempts[0].Decision
			if d.Delay != tt.want || d.HintSource != tt.source || d.Reason != engine.ReasonServerHint {
				t.Fatalf("decision %+v, want delay %v from %s", d, tt.want, tt.source)
			}
			if got := clock.Sleeps(); len(got) != 1 || got[0] != tt.want {
				t.Fatalf("slept %v, want exactly [%v]", got, tt.want)
			}
		})
	}
}

// TestRunNeverSendsBeforeHintedTime uses the real clock and a real upstream
// that records arrival times.
func TestRunNeverSendsBeforeHintedTime(t *testing.T) {
	up := newUpstream(t,
		reply{status: 503, kv: []string{"Retry-After", "1"}},
		reply{status: 429, kv: []string{"retry-after-ms", "300"}},
		reply{status: 200})
	f := newFixture(t, engine.SystemClock{}, memstore.New())
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), "azure"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeSuccess || up.count() != 3 {
		t.Fatalf("outcome %s, %d arrivals", res.Outcome, up.count())
	}
	gaps := []time.Duration{time.Second, 300 * time.Millisecond}
	for i, want := range gaps {
		if got := up.arrivals[i+1].Sub(up.arrivals[i]); got < want {
			t.Errorf("attempt %d arrived %v after attempt %d, before the hinted %v", i+2, got, i+1, want)
		}
	}
}

func TestRunGivesUpOnLongHintAndShortDeadline(t *testing.T) {
	t.Run("hint beyond max_delay", func(t *testing.T) {
		up := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "120"}, body: "slow down"})
		clock := engine.NewFakeClock(time.Now())
		f := newFixture(t, clock, nil)
		res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != engine.OutcomeHintExceedsMaxDelay || !res.HasRetryAfter || res.RetryAfter != 120*time.Second {
			t.Fatalf("outcome %s retry_after %v", res.Outcome, res.RetryAfter)
		}
		if res.Response.Status != 429 || string(res.Response.Body) != "slow down" || up.count() != 1 || len(clock.Sleeps()) != 0 {
			t.Fatalf("want the 429 returned at once; status %d body %q arrivals %d sleeps %v", res.Response.Status, res.Response.Body, up.count(), clock.Sleeps())
		}
	})
	t.Run("deadline shorter than hint", func(t *testing.T) {
		up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "5"}})
		f := newFixture(t, engine.SystemClock{}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		begin := time.Now()
		res, err := f.runner.Run(ctx, newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != engine.OutcomeDeadlineTooShort || res.RetryAfter != 5*time.Second {
			t.Fatalf("outcome %s retry_after %v", res.Outcome, res.RetryAfter)
		}
		if el := time.Since(begin); el > time.Second {
			t.Fatalf("took %v; must return at once instead of waiting to fail", el)
		}
	})
}

func TestRunCancellationDuringWait(t *testing.T) {
	up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "30"}}, reply{status: 200})
	f := newFixture(t, engine.SystemClock{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for up.count() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	begin := time.Now()
	res, err := f.runner.Run(ctx, newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if time.Since(begin) > 5*time.Second || res.Outcome != engine.OutcomeCanceled {
		t.Fatalf("outcome %s after %v", res.Outcome, time.Since(begin))
	}
	time.Sleep(100 * time.Millisecond)
	if up.count() != 1 {
		t.Fatalf("upstream saw %d requests; no attempt may start after cancellation", up.count())
	}
}

func TestRunUnsafeMethods(t *testing.T) {
	t.Run("POST not retried", func(t *testing.T) {
		up := newUpstream(t, reply{status: 503}, reply{status: 200})
		f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
		c := newCall(t, up.URL, "POST", mustPolicy(t, nil), "")
		c.Body = []byte(`{"a":1}`)
		res, err := f.runner.Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != engine.OutcomeNotRetryable || up.count() != 1 || res.Attempts[0].Decision.Reason != engine.ReasonUnsafeMethod {
			t.Fatalf("outcome %s, %d sends, reason %s", res.Outcome, up.count(), res.Attempts[0].Decision.Reason)
		}
	})
	t.Run("POST with idempotency key retried with the same key and body", func(t *testing.T) {
		up := newUpstream(t, reply{status: 503}, reply{status: 502}, reply{status: 201})
		f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
		c := newCall(t, up.URL, "POST", mustPolicy(t, nil), "")
		c.Header.Set("Idempotency-Key", "key-42")
		c.Body = []byte(`{"a":1}`)
		res, err := f.runner.Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != engine.OutcomeSuccess || up.count() != 3 {
			t.Fatalf("outcome %s after %d sends", res.Outcome, up.count())
		}
		for i, r := range up.requests {
			if got := r.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != "key-42" {
				t.Errorf("send %d idempotency key %v", i+1, got)
			}
			if up.bodies[i] != `{"a":1}` {
				t.Errorf("send %d body %q", i+1, up.bodies[i])
			}
		}
	})
	t.Run("generated key is identical on every attempt, attempt header set", func(t *testing.T) {
		up := newUpstream(t, reply{status: 503}, reply{status: 200})
		f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
		p := mustPolicy(t, func(p *engine.Policy) { p.GenerateIdempotencyKey = true; p.AttemptHeader = "X-Retry-Attempt" })
		c := newCall(t, up.URL, "PATCH", p, "")
		c.Header.Add("X-Retry-Attempt", "99") // set, never appended
		res, err := f.runner.Run(t.Context(), c)
		if err != nil || res.Outcome != engine.OutcomeSuccess {
			t.Fatalf("err %v outcome %v", err, res.Outcome)
		}
		k1, k2 := up.requests[0].Header.Values("Idempotency-Key"), up.requests[1].Header.Values("Idempotency-Key")
		if len(k1) != 1 || len(k2) != 1 || k1[0] != k2[0] || len(k1[0]) != 36 {
			t.Fatalf("keys %v then %v", k1, k2)
		}
		for i, r := range up.requests {
			if got := r.Header.Values("X-Retry-Attempt"); len(got) != 1 || got[0] != strconv.Itoa(i+1) {
				t.Errorf("send %d attempt header %v", i+1, got)
			}
		}
	})
}

func TestRunRetriesTransportErrors(t *testing.T) {
	up := newUpstream(t, reply{hangup: true}, reply{status: 200})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeSuccess || len(res.Attempts) != 2 {
		t.Fatalf("outcome %s attempts %d", res.Outcome, len(res.Attempts))
	}
	if k := res.Attempts[0].Transport; k != engine.TransportEOF && k != engine.TransportConnectionReset {
		t.Fatalf("first attempt transport %s, want eof or reset", k)
	}
	// A refused connection: nothing listens on this port any more.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	_ = lis.Close()
	res, err = f.runner.Run(t.Context(), newCall(t, "http://"+addr+"/", "GET", mustPolicy(t, nil), ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 4 || res.Outcome != engine.OutcomeAttemptsExhausted || res.Attempts[0].Transport != engine.TransportConnectionRefused || res.Response != nil {
		t.Fatalf("attempts %d outcome %s transport %s", len(res.Attempts), res.Outcome, res.Attempts[0].Transport)
	}
}

func TestRunBodiesAndHeaders(t *testing.T) {
	big := strings.Repeat("x", 100)
	up := newUpstream(t, reply{status: 200, body: big, kv: []string{"Set-Cookie", "a=1", "Set-Cookie", "b=2"}})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	c := newCall(t, up.URL, "GET", mustPolicy(t, nil), "")
	c.MaxResponseBody = 10
	res, err := f.runner.Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Response.Truncated || string(res.Response.Body) != big[:10] {
		t.Fatalf("truncated %v body %q", res.Response.Truncated, res.Response.Body)
	}
	if got := res.Response.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" {
		t.Fatalf("duplicate headers not kept in order: %v", got)
	}
}

// TestRunSpans: N attempts give N client spans, children of the caller's
// span, with resend counts, the decision, waits, and traceparent upstream.
func TestRunSpans(t *testing.T) {
	up := newUpstream(t, reply{status: 503}, reply{status: 429, kv: []string{"Retry-After", "2"}}, reply{status: 200})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	ctx, parent := f.tp.Tracer("test").Start(t.Context(), "Execute")
	c := newCall(t, up.URL+"/p?token=sekrit&x=1", "GET", mustPolicy(t, nil), "")
	c.Header.Set("Authorization", "Bearer sekrit")
	if _, err := f.runner.Run(ctx, c); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var clients, waits []sdktrace.ReadOnlySpan
	for _, s := range f.rec.Ended() {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "sekrit") {
				t.Errorf("span %s attribute %s leaks a secret: %s", s.Name(), kv.Key, kv.Value.String())
			}
		}
		switch {
		case s.SpanKind() == trace.SpanKindClient:
			clients = append(clients, s)
		case s.Name() == "retrybroker.wait":
			waits = append(waits, s)
		}
	}
	if len(clients) != 3 {
		t.Fatalf("%d client spans, want 3", len(clients))
	}
	for i, s := range clients {
		attrs := attrMap(s.Attributes())
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d is not a child of the Execute span", i+1)
		}
		if i == 0 {
			if _, ok := attrs["http.request.resend_count"]; ok {
				t.Error("first attempt must not carry http.request.resend_count")
			}
		} else if attrs["http.request.resend_count"] != strconv.Itoa(i) {
			t.Errorf("span %d resend_count = %q, want %d", i+1, attrs["http.request.resend_count"], i)
		}
		if attrs["http.request.method"] != "GET" || attrs["server.address"] != "127.0.0.1" || attrs["url.full"] == "" {
			t.Errorf("span %d missing semconv attributes: %v", i+1, attrs)
		}
		if !strings.Contains(attrs["url.full"], "token=REDACTED") {
			t.Errorf("url.full not redacted: %q", attrs["url.full"])
		}
	}
	if a := attrMap(clients[1].Attributes()); a["http.response.status_code"] != "429" || a["retrybroker.decision.reason"] != "REASON_SERVER_HINT" || a["retrybroker.decision.delay_ms"] != "2000" || a["retrybroker.decision.hint_source"] != "retry-after" {
		t.Errorf("second attempt span attributes %v", a)
	}
	if a := attrMap(clients[0].Attributes()); a["error.type"] != "503" || a["retrybroker.decision.reason"] != "REASON_BACKOFF" {
		t.Errorf("first attempt span attributes %v", a)
	}
	if len(waits) != 2 {
		t.Errorf("%d wait spans, want 2 (backoff, hint)", len(waits))
	}
	for i, r := range up.requests {
		tp := r.Header.Get("Traceparent")
		if tp == "" || !strings.Contains(tp, parent.SpanContext().TraceID().String()) {
			t.Errorf("send %d traceparent %q does not carry the trace", i+1, tp)
		}
	}
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// newSilentUpstream is an upstream that never answers: it holds each
// request until the client gives up or the test ends.
func newSilentUpstream(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs before Close: cleanups run last added first
	return slow
}

// TestRunTotalTimeoutBoundsSlowAttempts: a slow upstream cannot hold the
// call past the policy's total timeout; the call ends with an outcome, not
// an error.
func TestRunTotalTimeoutBoundsSlowAttempts(t *testing.T) {
	slow := newSilentUpstream(t)
	f := newFixture(t, engine.SystemClock{}, nil)
	p := mustPolicy(t, func(p *engine.Policy) { p.TotalTimeout = 300 * time.Millisecond })
	begin := time.Now()
	res, err := f.runner.Run(t.Context(), newCall(t, slow.URL, "GET", p, ""))
	if err != nil {
		t.Fatalf("err = %v; the total timeout is an outcome, not an error", err)
	}
	if el := time.Since(begin); el > 2*time.Second {
		t.Fatalf("call took %v, total timeout is 300ms", el)
	}
	if res.Outcome != engine.OutcomeDeadlineTooShort || len(res.Attempts) != 1 || res.Attempts[0].Transport != engine.TransportTimeout {
		t.Fatalf("outcome %s, %d attempts, transport %s", res.Outcome, len(res.Attempts), res.Attempts[0].Transport)
	}
}

// TestRunAttemptTimeoutEndsEachAttempt: every attempt is cut at the
// attempt timeout, the first (whose context is a child of the caller's)
// and the retries after a backoff (children of the call's own context), as
// a transport timeout that is retried, and a slow upstream holds no
// attempt much past it.
func TestRunAttemptTimeoutEndsEachAttempt(t *testing.T) {
	slow := newSilentUpstream(t)
	f := newFixture(t, engine.SystemClock{}, nil)
	const timeout = 200 * time.Millisecond
	p := mustPolicy(t, func(p *engine.Policy) {
		p.AttemptTimeout, p.MaxRetries = timeout, 2
		p.Backoff = engine.Backoff{Base: 10 * time.Millisecond, Factor: 1, Cap: 10 * time.Millisecond, Jitter: engine.JitterNone}
	})
	res, err := f.runner.Run(t.Context(), newCall(t, slow.URL, "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 3 {
		t.Fatalf("%d attempts, want 3 (outcome %s)", len(res.Attempts), res.Outcome)
	}
	for i, a := range res.Attempts {
		if a.Transport != engine.TransportTimeout || a.Duration < timeout || a.Duration > timeout+time.Second {
			t.Errorf("attempt %d: transport %s after %v, want a timeout after %v", i+1, a.Transport, a.Duration, timeout)
		}
		if i < 2 && a.Decision.Action != engine.ActionRetry {
			t.Errorf("attempt %d: decision %+v, want a retry", i+1, a.Decision)
		}
	}
}

// slowStartTracer records nothing and takes delay to start each span, as
// an exporter under back-pressure or a slow sampler can.
type slowStartTracer struct {
	noop.Tracer
	delay time.Duration
}

func (t slowStartTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	time.Sleep(t.delay)
	return t.Tracer.Start(ctx, name, opts...)
}

// TestRunAttemptRecordStartsWithItsTimeout: an attempt's record starts
// at the instant its attempt timeout is counted from, so a timed-out
// attempt never records less than its timeout, however long the set-up
// between its context and its request takes (here a tracer that takes
// 40 ms to start the attempt's span: with the record started after the
// span, the attempt recorded about 60 ms of a 100 ms timeout).
func TestRunAttemptRecordStartsWithItsTimeout(t *testing.T) {
	slow := newSilentUpstream(t)
	const timeout = 100 * time.Millisecond
	r := engine.NewRunner(memstore.New(), engine.WithTracer(slowStartTracer{delay: 40 * time.Millisecond}))
	p := mustPolicy(t, func(p *engine.Policy) { p.AttemptTimeout, p.MaxRetries = timeout, 0 })
	res, err := r.Run(t.Context(), newCall(t, slow.URL, "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1 (outcome %s)", len(res.Attempts), res.Outcome)
	}
	if a := res.Attempts[0]; a.Transport != engine.TransportTimeout || a.Duration < timeout || a.Duration > timeout+time.Second {
		t.Errorf("transport %s after %v, want a timeout after %v", a.Transport, a.Duration, timeout)
	}
}

// TestRunLeavesCallHeaderAlone: a generated idempotency key goes into a
// copy, so running the same Call twice gives each logical call its own key.
func TestRunLeavesCallHeaderAlone(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	p := mustPolicy(t, func(p *engine.Policy) { p.GenerateIdempotencyKey = true })
	c := newCall(t, up.URL, "POST", p, "")
	for range 2 {
		if _, err := f.runner.Run(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Header.Get("Idempotency-Key"); got != "" {
		t.Fatalf("Run wrote %q into the call's header", got)
	}
	k1, k2 := up.requests[0].Header.Get("Idempotency-Key"), up.requests[1].Header.Get("Idempotency-Key")
	if k1 == "" || k1 == k2 {
		t.Fatalf("keys %q and %q: two logical calls must get two keys", k1, k2)
	}
}
