package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// sinkEvent is one call the runner made on a recordingSink.
type sinkEvent struct {
	at   time.Time
	head *engine.StreamHead
	data []byte
}

// recordingSink records the head and every chunk with its arrival time.
// failAfter, when positive, makes the chunk call after that many bytes
// fail (a caller that went away); onChunk, when set, runs on each chunk.
type recordingSink struct {
	mu        sync.Mutex
	events    []sinkEvent
	failHead  bool
	failAfter int
	onChunk   func(total int)
	total     int
}

func (s *recordingSink) Head(h engine.StreamHead) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, sinkEvent{at: time.Now(), head: &h})
	if s.failHead {
		return errors.New("receiver gone")
	}
	return nil
}

func (s *recordingSink) Chunk(p []byte) error {
	s.mu.Lock()
	s.events = append(s.events, sinkEvent{at: time.Now(), data: bytes.Clone(p)})
	s.total += len(p)
	total, fn := s.total, s.onChunk
	fail := s.failAfter > 0 && total >= s.failAfter
	s.mu.Unlock()
	if fn != nil {
		fn(total)
	}
	if fail {
		return errors.New("receiver gone")
	}
	return nil
}

func (s *recordingSink) head() *engine.StreamHead {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.head != nil {
			return e.head
		}
	}
	return nil
}

func (s *recordingSink) body() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, e := range s.events {
		b.Write(e.data)
	}
	return b.String()
}

// streamUpstream is a loopback HTTP server whose handler is given, and
// which records when each of its connections closed.
type streamUpstream struct {
	*httptest.Server
	closed   chan struct{} // receives one value per closed connection
	requests atomic.Int32
}

func newStreamUpstream(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *streamUpstream {
	t.Helper()
	u := &streamUpstream{closed: make(chan struct{}, 64)}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(int(u.requests.Add(1)), w, r)
	}))
	u.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			u.closed <- struct{}{}
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// waitClosed fails the test unless the upstream saw a connection close
// within 5 seconds.
func (u *streamUpstream) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-u.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream connection was not closed")
	}
}

func flushWrite(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

func streamCall(t *testing.T, url string, mut func(*engine.Policy)) *engine.Call {
	t.Helper()
	return newCall(t, url, "GET", mustPolicy(t, mut), "")
}

// TestStreamRetriesThenStreams: a 503 is retried exactly as Execute
// retries it (on the fake clock); the 200 is streamed with its head
// carrying both attempts, and its body reaches the sink whole.
func TestStreamRetriesThenStreams(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 10_000) // 160 KB: several chunks
	up := newStreamUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "busy")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, body)
	})
	clock := engine.NewFakeClock(time.Now())
	f := newFixture(t, clock, nil)
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndComplete || res.Outcome != engine.OutcomeSuccess || !res.HeadSent || res.Error != "" {
		t.Fatalf("end %s outcome %s head %v error %q", res.BodyEnd, res.Outcome, res.HeadSent, res.Error)
	}
	if got := clock.Sleeps(); len(got) != 1 || got[0] != 3*time.Second {
		t.Fatalf("sleeps %v, want the 3s hint", got)
	}
	h := sink.head()
	if h == nil || h.Status != 200 || h.Header.Get("Content-Type") != "application/octet-stream" || len(h.Attempts) != 2 {
		t.Fatalf("head %+v", h)
	}
	if h.Attempts[0].Status != 503 || h.Attempts[0].Decision.Reason != engine.ReasonServerHint || h.Attempts[1].Status != 200 {
		t.Fatalf("head attempts %+v", h.Attempts)
	}
	if got := sink.body(); got != body || res.BodyBytes != int64(len(body)) {
		t.Fatalf("streamed %d bytes (reported %d), want %d", len(got), res.BodyBytes, len(body))
	}
	for _, e := range sink.events {
		if len(e.data) > engine.StreamChunkSize {
			t.Fatalf("a chunk of %d bytes exceeds StreamChunkSize", len(e.data))
		}
	}
	if len(res.Attempts) != 2 || res.Response == nil || res.Response.Incomplete {
		t.Fatalf("result attempts %d response %+v", len(res.Attempts), res.Response)
	}
}

// TestStreamDeliversEachEventBeforeTheNext: an SSE upstream flushing an
// event every 100ms; each event reaches the sink before the upstream
// sends the next one (the upstream's own send times against the sink's
// receive times).
func TestStreamDeliversEachEventBeforeTheNext(t *testing.T) {
	const events = 4
	var mu sync.Mutex
	var sent []time.Time
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := range events {
			if i > 0 {
				select {
				case <-time.After(100 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			flushWrite(w, fmt.Sprintf("data: event %d\n\n", i))
		}
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), sink)
	if err != nil || res.BodyEnd != engine.BodyEndComplete {
		t.Fatalf("err %v end %v", err, res.BodyEnd)
	}
	// Map each event to the time its last byte reached the sink.
	received := make([]time.Time, 0, events)
	var acc string
	for _, e := range sink.events {
		acc += string(e.data)
		for len(received) < events && strings.Contains(acc, fmt.Sprintf("data: event %d\n\n", len(received))) {
			received = append(received, e.at)
		}
	}
	if len(received) != events || len(sent) != events {
		t.Fatalf("received %d events, upstream sent %d", len(received), len(sent))
	}
	for i := 0; i+1 < events; i++ {
		if !received[i].Before(sent[i+1]) {
			t.Errorf("event %d reached the sink %v after the upstream sent event %d", i, received[i].Sub(sent[i+1]), i+1)
		}
	}
}

// TestStreamMidBodyResetIsNeverRetried: a 200 whose body breaks off after
// the head ends with BodyEndUpstreamError and the error, an outcome that
// is not success, and no second attempt.
func TestStreamMidBodyResetIsNeverRetried(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		flushWrite(w, strings.Repeat("x", 5000))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
			_ = conn.Close()
		}
	})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	sink := &recordingSink{}
	c := streamCall(t, up.URL+"/dl?token=sekrit", nil)
	res, err := f.runner.Stream(t.Context(), c, sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndUpstreamError || res.Outcome == engine.OutcomeSuccess || res.Error == "" {
		t.Fatalf("end %s outcome %s error %q", res.BodyEnd, res.Outcome, res.Error)
	}
	if strings.Contains(res.Error, "sekrit") {
		t.Fatalf("error message leaks the query: %q", res.Error)
	}
	if res.BodyBytes != 5000 || len(sink.body()) != 5000 {
		t.Fatalf("streamed %d bytes (reported %d), want the 5000 that arrived", len(sink.body()), res.BodyBytes)
	}
	if up.requests.Load() != 1 || len(res.Attempts) != 1 {
		t.Fatalf("upstream saw %d requests, %d attempts: a streamed body is never retried", up.requests.Load(), len(res.Attempts))
	}
	if a := res.Attempts[0]; a.Status != 200 || a.Transport != engine.TransportBodyIncomplete || a.Error == "" {
		t.Fatalf("attempt record %+v", a)
	}
}

// TestStreamRetriesBodyBreakBeforeHead: a 404 whose body breaks while the
// broker peeks at it for hints has sent nothing yet: it is a
// TransportBodyIncomplete failure and retried, exactly as Execute does.
func TestStreamRetriesBodyBreakBeforeHead(t *testing.T) {
	up := newStreamUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(404)
			flushWrite(w, "partial")
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(404)
		_, _ = io.WriteString(w, "not found")
	})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), sink)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 2 || res.Attempts[0].Transport != engine.TransportBodyIncomplete || res.Attempts[0].Decision.Action != engine.ActionRetry {
		t.Fatalf("attempts %+v", res.Attempts)
	}
	if res.BodyEnd != engine.BodyEndComplete || sink.body() != "not found" || res.Outcome != engine.OutcomeNotRetryable {
		t.Fatalf("end %s body %q outcome %s", res.BodyEnd, sink.body(), res.Outcome)
	}
	if h := sink.head(); h == nil || h.Status != 404 || len(h.Attempts) != 2 {
		t.Fatalf("head %+v", h)
	}
}

// TestStreamIdleTimeout: an upstream that stops sending ends the body with
// BodyEndIdleTimeout, and its connection is closed.
func TestStreamIdleTimeout(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		flushWrite(w, "first")
		<-r.Context().Done() // silent until the broker hangs up
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, func(p *engine.Policy) { p.Stream.IdleTimeout = 150 * time.Millisecond }), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndIdleTimeout || res.Outcome != engine.OutcomeNotRetryable || !strings.Contains(res.Error, "idle timeout") {
		t.Fatalf("end %s outcome %s error %q", res.BodyEnd, res.Outcome, res.Error)
	}
	if sink.body() != "first" {
		t.Fatalf("body %q", sink.body())
	}
	up.waitClosed(t)
}

// TestStreamTimeoutsBoundTheHeadNotTheBody: the attempt timeout and the
// total timeout (150ms each) do not cut a body that takes 600ms, since
// every read comes well within the idle timeout; the attempt timeout still
// bounds the wait for the head.
func TestStreamTimeoutsBoundTheHeadNotTheBody(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-head" {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(200)
		for i := range 6 {
			flushWrite(w, fmt.Sprintf("part %d;", i))
			time.Sleep(100 * time.Millisecond)
		}
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	short := func(p *engine.Policy) {
		p.AttemptTimeout, p.TotalTimeout, p.MaxRetries = 150*time.Millisecond, 150*time.Millisecond, 0
	}
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL+"/body", short), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndComplete || !strings.HasSuffix(sink.body(), "part 5;") {
		t.Fatalf("end %s (%s) body %q", res.BodyEnd, res.Error, sink.body())
	}

	sink = &recordingSink{}
	begin := time.Now()
	res, err = f.runner.Stream(t.Context(), streamCall(t, up.URL+"/slow-head", short), sink)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el > time.Second {
		t.Fatalf("took %v: the attempt timeout must bound the wait for the head", el)
	}
	if res.BodyEnd != engine.BodyEndNoResponse || res.HeadSent || len(res.Attempts) != 1 || res.Attempts[0].Transport != engine.TransportTimeout {
		t.Fatalf("end %s head %v attempts %+v", res.BodyEnd, res.HeadSent, res.Attempts)
	}
}

// TestStreamMaxBytes: the byte cap streams exactly the cap and ends with
// BodyEndSizeLimit; a body of exactly the cap is complete.
func TestStreamMaxBytes(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		n := 100_000
		if r.URL.Path == "/exact" {
			n = 40_000
		}
		_, _ = io.WriteString(w, strings.Repeat("b", n))
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	capped := func(p *engine.Policy) { p.Stream.MaxBytes = 40_000 }
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL+"/big", capped), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndSizeLimit || res.BodyBytes != 40_000 || len(sink.body()) != 40_000 || res.Outcome == engine.OutcomeSuccess {
		t.Fatalf("end %s bytes %d/%d outcome %s", res.BodyEnd, res.BodyBytes, len(sink.body()), res.Outcome)
	}
	res, err = f.runner.Stream(t.Context(), streamCall(t, up.URL+"/exact", capped), &recordingSink{})
	if err != nil || res.BodyEnd != engine.BodyEndComplete || res.BodyBytes != 40_000 {
		t.Fatalf("exact: err %v end %s bytes %d", err, res.BodyEnd, res.BodyBytes)
	}
	// The call's MaxResponseBody narrows the cap.
	c := streamCall(t, up.URL+"/exact", capped)
	c.MaxResponseBody = 1000
	res, err = f.runner.Stream(t.Context(), c, &recordingSink{})
	if err != nil || res.BodyEnd != engine.BodyEndSizeLimit || res.BodyBytes != 1000 {
		t.Fatalf("narrowed: err %v end %s bytes %d", err, res.BodyEnd, res.BodyBytes)
	}
}

// TestStreamMaxDuration: a body still trickling after max_duration ends
// with BodyEndTimeout.
func TestStreamMaxDuration(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			flushWrite(w, ".")
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, func(p *engine.Policy) { p.Stream.MaxDuration = 200 * time.Millisecond }), &recordingSink{})
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndTimeout || res.BodyBytes == 0 || res.Outcome == engine.OutcomeSuccess {
		t.Fatalf("end %s bytes %d outcome %s", res.BodyEnd, res.BodyBytes, res.Outcome)
	}
	up.waitClosed(t)
}

// TestStreamCancel: the caller canceling mid-body ends it with
// BodyEndCanceled and closes the upstream connection; so does a sink that
// fails (the receiver went away).
func TestStreamCancel(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			flushWrite(w, strings.Repeat("c", 1000))
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	sink := &recordingSink{onChunk: func(total int) {
		if total >= 3000 {
			cancel()
		}
	}}
	res, err := f.runner.Stream(ctx, streamCall(t, up.URL, nil), sink)
	if err != nil {
		t.Fatalf("err %v: after the head, the end is in the result", err)
	}
	if res.BodyEnd != engine.BodyEndCanceled || res.Outcome != engine.OutcomeCanceled {
		t.Fatalf("end %s outcome %s", res.BodyEnd, res.Outcome)
	}
	up.waitClosed(t)

	res, err = f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), &recordingSink{failAfter: 2000})
	if err != nil || res.BodyEnd != engine.BodyEndCanceled {
		t.Fatalf("failing sink: err %v end %s", err, res.BodyEnd)
	}
	up.waitClosed(t)
}

// TestStreamDrainCutsTheBody: the broker's drain deadline ends a body in
// progress with BodyEndShuttingDown and OutcomeShuttingDown.
func TestStreamDrainCutsTheBody(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			flushWrite(w, "d")
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	var once sync.Once
	sink := &recordingSink{onChunk: func(int) {
		once.Do(func() { f.runner.Drain(time.Now().Add(100 * time.Millisecond)) })
	}}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndShuttingDown || res.Outcome != engine.OutcomeShuttingDown {
		t.Fatalf("end %s outcome %s", res.BodyEnd, res.Outcome)
	}
	up.waitClosed(t)
}

// TestStreamTrailers: the upstream's HTTP trailers come back with a
// complete body.
func TestStreamTrailers(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(200)
		flushWrite(w, "payload")
		w.Header().Set("X-Checksum", "abc123")
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, nil), &recordingSink{})
	if err != nil || res.BodyEnd != engine.BodyEndComplete {
		t.Fatalf("err %v end %s", err, res.BodyEnd)
	}
	if got := res.Trailers.Get("X-Checksum"); got != "abc123" {
		t.Fatalf("trailers %v", res.Trailers)
	}
}

// TestStreamNoResponse: a call that ends without a final response sends
// no head; its end says so.
func TestStreamNoResponse(t *testing.T) {
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens: connection refused
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, "http://"+addr+"/", func(p *engine.Policy) { p.MaxRetries = 1 }), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.BodyEnd != engine.BodyEndNoResponse || res.HeadSent || len(sink.events) != 0 || len(res.Attempts) != 2 {
		t.Fatalf("end %s head %v events %d attempts %d", res.BodyEnd, res.HeadSent, len(sink.events), len(res.Attempts))
	}
	if res.Attempts[1].Transport != engine.TransportConnectionRefused || res.Outcome != engine.OutcomeAttemptsExhausted {
		t.Fatalf("attempt %+v outcome %s", res.Attempts[1], res.Outcome)
	}
}

// TestStreamSpanCoversTheBody: the attempt's client span ends after the
// last chunk and carries the byte count and how the body ended.
func TestStreamSpanCoversTheBody(t *testing.T) {
	up := newStreamUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		flushWrite(w, "one;")
		time.Sleep(50 * time.Millisecond)
		flushWrite(w, "two;")
	})
	f := newFixture(t, engine.SystemClock{}, nil)
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL+"/?key=sekrit", nil), sink)
	if err != nil || res.BodyEnd != engine.BodyEndComplete {
		t.Fatalf("err %v end %s", err, res.BodyEnd)
	}
	var found bool
	for _, s := range f.rec.Ended() {
		if s.SpanKind() != trace.SpanKindClient {
			continue
		}
		found = true
		a := attrMap(s.Attributes())
		if a["http.response.body.size"] != "8" || a["retrybroker.stream.body_end"] != "complete" {
			t.Errorf("span attributes %v", a)
		}
		for k, v := range a {
			if strings.Contains(v, "sekrit") {
				t.Errorf("attribute %s leaks a secret: %s", k, v)
			}
		}
		last := sink.events[len(sink.events)-1].at
		if s.EndTime().Before(last) {
			t.Errorf("span ended %v before the last chunk", last.Sub(s.EndTime()))
		}
	}
	if !found {
		t.Fatal("no client span")
	}
}
