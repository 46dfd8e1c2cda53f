package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// received is one message of an ExecuteStream call with its arrival time.
type received struct {
	at  time.Time
	msg *rbv1.ExecuteStreamResponse
}

// streamed is a whole ExecuteStream call as the caller saw it.
type streamed struct {
	msgs []received
	err  error // the RPC's status, nil when it ended with OK
}

func (s *streamed) head() *rbv1.StreamHead {
	for _, m := range s.msgs {
		if h := m.msg.GetHead(); h != nil {
			return h
		}
	}
	return nil
}

func (s *streamed) end() *rbv1.StreamEnd {
	if n := len(s.msgs); n > 0 {
		return s.msgs[n-1].msg.GetEnd()
	}
	return nil
}

func (s *streamed) body() string {
	var b strings.Builder
	for _, m := range s.msgs {
		b.Write(m.msg.GetChunk())
	}
	return b.String()
}

// checkOrder fails unless the messages are one head, chunks, one end, in
// that order (or only an end when there is no head).
func (s *streamed) checkOrder(t *testing.T) {
	t.Helper()
	for i, m := range s.msgs {
		switch {
		case m.msg.GetHead() != nil && i != 0:
			t.Errorf("head is message %d, want 0", i)
		case m.msg.GetEnd() != nil && i != len(s.msgs)-1:
			t.Errorf("end is message %d of %d, want the last", i, len(s.msgs))
		case m.msg.GetChunk() != nil && (i == 0 || s.msgs[0].msg.GetHead() == nil):
			t.Errorf("chunk %d before any head", i)
		}
	}
}

// streamCall runs ExecuteStream to its end; onMsg, when set, sees each
// message as it arrives.
func streamCall(ctx context.Context, t *testing.T, client rbv1.BrokerServiceClient, req *rbv1.ExecuteRequest, onMsg func(*rbv1.ExecuteStreamResponse)) *streamed {
	t.Helper()
	st, err := client.ExecuteStream(ctx, req)
	if err != nil {
		return &streamed{err: err}
	}
	out := &streamed{}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		out.msgs = append(out.msgs, received{at: time.Now(), msg: m})
		if onMsg != nil {
			onMsg(m)
		}
	}
}

func get(url string) *rbv1.ExecuteRequest {
	return &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: url}}
}

// closingUpstream is a loopback HTTP server that reports each closed
// connection on closed.
func closingUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, chan struct{}) {
	t.Helper()
	closed := make(chan struct{}, 64)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, closed
}

func waitClosed(t *testing.T, closed chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream connection was not closed")
	}
}

func flush(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

// TestExecuteStreamSSE: an upstream sends a server-sent event every 300ms;
// each event reaches the gRPC caller before the upstream sends the next
// one, measured against the upstream's own send times.
func TestExecuteStreamSSE(t *testing.T) {
	const events = 4
	var mu sync.Mutex
	var sent []time.Time
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := range events {
			if i > 0 {
				select {
				case <-time.After(300 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			flush(w, fmt.Sprintf("event: tick\ndata: {\"n\":%d}\n\n", i))
		}
	})
	f := startExecBroker(t, nil)
	got := streamCall(t.Context(), t, f.client, get(up.URL+"/v1/chat"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.checkOrder(t)
	if h := got.head(); h.GetStatusCode() != 200 || len(h.GetAttempts()) != 1 {
		t.Fatalf("head %v", h)
	}
	var acc string
	var arrived []time.Time
	for _, m := range got.msgs {
		acc += string(m.msg.GetChunk())
		for len(arrived) < events && strings.Contains(acc, fmt.Sprintf("data: {\"n\":%d}\n\n", len(arrived))) {
			arrived = append(arrived, m.at)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrived) != events || len(sent) != events {
		t.Fatalf("caller got %d events, upstream sent %d", len(arrived), len(sent))
	}
	for i := 0; i+1 < events; i++ {
		if !arrived[i].Before(sent[i+1]) {
			t.Errorf("event %d reached the caller %v after the upstream sent event %d", i, arrived[i].Sub(sent[i+1]), i+1)
		}
	}
	if e := got.end(); !e.GetBodyComplete() || e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_COMPLETE || e.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || e.GetBodyBytes() != uint64(len(acc)) {
		t.Fatalf("end %v", e)
	}
}

// TestExecuteStreamRetriesThenStreams: the retry happens before the head
// (which carries both attempts); the end repeats them with the outcome,
// the byte count and the trailers.
func TestExecuteStreamRetriesThenStreams(t *testing.T) {
	body := strings.Repeat("z", 100_000)
	up := newScripted(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
			return
		}
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Add("X-Dup", "a")
		w.Header().Add("X-Dup", "b")
		w.WriteHeader(200)
		flush(w, body)
		w.Header().Set("X-Sum", "42")
	})
	f := startExecBroker(t, nil)
	got := streamCall(t.Context(), t, f.client, get(up.URL+"/file"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.checkOrder(t)
	h := got.head()
	if h.GetStatusCode() != 200 || len(h.GetAttempts()) != 2 || h.GetAttempts()[0].GetStatusCode() != 503 || h.GetProvider() != "retry-after" {
		t.Fatalf("head %v", h)
	}
	var dups []string
	for _, hh := range h.GetHeaders() {
		if hh.GetName() == "X-Dup" {
			dups = append(dups, hh.GetValue())
		}
	}
	if strings.Join(dups, ",") != "a,b" {
		t.Fatalf("X-Dup lines %v", dups)
	}
	if got.body() != body {
		t.Fatalf("body of %d bytes, want %d", len(got.body()), len(body))
	}
	e := got.end()
	if !e.GetBodyComplete() || e.GetBodyBytes() != uint64(len(body)) || len(e.GetAttempts()) != 2 || e.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("end %v", e)
	}
	if len(e.GetTrailers()) != 1 || e.GetTrailers()[0].GetName() != "X-Sum" || e.GetTrailers()[0].GetValue() != "42" {
		t.Fatalf("trailers %v", e.GetTrailers())
	}
	for i, m := range got.msgs {
		if c := m.msg.GetChunk(); len(c) > engine.StreamChunkSize {
			t.Fatalf("message %d carries %d bytes", i, len(c))
		}
	}
}

// TestExecuteStreamErrorsBeforeHead: the statuses are Execute's.
func TestExecuteStreamErrorsBeforeHead(t *testing.T) {
	f := startExecBroker(t, nil)
	for _, tc := range []struct {
		name string
		req  *rbv1.ExecuteRequest
		code codes.Code
	}{
		{"refused destination", get("http://internal.example/"), codes.PermissionDenied},
		{"metadata address", get("http://169.254.169.254/latest/"), codes.PermissionDenied},
		{"bad url", get("ftp://x/"), codes.InvalidArgument},
		{"unknown policy", &rbv1.ExecuteRequest{Policy: "nope", Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}}, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := streamCall(t.Context(), t, f.client, tc.req, nil)
			if status.Code(got.err) != tc.code || len(got.msgs) != 0 {
				t.Fatalf("err %v after %d messages, want %s and none", got.err, len(got.msgs), tc.code)
			}
		})
	}
	if d := f.dialer.nonLoopback(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
}

// TestExecuteStreamNoResponse: a call without a final response sends only
// end, saying why.
func TestExecuteStreamNoResponse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	f := startExecBroker(t, func(p *tenant.Policy) { p.MaxRetries = 0 })
	got := streamCall(t.Context(), t, f.client, get("http://"+addr+"/"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	e := got.end()
	if len(got.msgs) != 1 || e == nil {
		t.Fatalf("%d messages, want only end", len(got.msgs))
	}
	if e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_NO_RESPONSE || e.GetBodyComplete() || len(e.GetAttempts()) != 1 ||
		e.GetAttempts()[0].GetTransportError() != rbv1.TransportError_TRANSPORT_ERROR_CONNECTION_REFUSED || !strings.Contains(e.GetErrorMessage(), "refused") {
		t.Fatalf("end %v", e)
	}
}

// TestExecuteStreamMidBodyReset: a body the upstream resets ends with
// body_complete false, BODY_END_UPSTREAM_ERROR and the error; it is not
// retried.
func TestExecuteStreamMidBodyReset(t *testing.T) {
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "50000")
		w.WriteHeader(200)
		flush(w, strings.Repeat("r", 1000))
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	})
	f := startExecBroker(t, nil)
	got := streamCall(t.Context(), t, f.client, get(up.URL+"/?sig=sekrit"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	e := got.end()
	if e.GetBodyComplete() || e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_UPSTREAM_ERROR || e.GetErrorMessage() == "" ||
		e.GetOutcome() == rbv1.Outcome_OUTCOME_SUCCESS || e.GetBodyBytes() != 1000 || got.body() != strings.Repeat("r", 1000) {
		t.Fatalf("end %v, %d body bytes", e, len(got.body()))
	}
	if strings.Contains(e.GetErrorMessage(), "sekrit") {
		t.Fatalf("error message leaks the query: %q", e.GetErrorMessage())
	}
	if up.n.Load() != 1 {
		t.Fatalf("upstream saw %d requests: nothing is retried once a body byte has left", up.n.Load())
	}
	if a := e.GetAttempts(); len(a) != 1 || a[0].GetTransportError() != rbv1.TransportError_TRANSPORT_ERROR_BODY_INCOMPLETE || a[0].GetStatusCode() != 200 {
		t.Fatalf("attempts %v", a)
	}
}

// TestExecuteStreamIdleTimeout: an upstream that goes quiet ends the body
// with BODY_END_IDLE_TIMEOUT, and its connection is closed.
func TestExecuteStreamIdleTimeout(t *testing.T) {
	up, closed := closingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		flush(w, "data: 1\n\n")
		<-r.Context().Done()
	})
	f := startExecBroker(t, func(p *tenant.Policy) { p.Stream.IdleTimeout = 200 * time.Millisecond })
	got := streamCall(t.Context(), t, f.client, get(up.URL), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if e := got.end(); e.GetBodyComplete() || e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_IDLE_TIMEOUT || !strings.Contains(e.GetErrorMessage(), "idle") || got.body() != "data: 1\n\n" {
		t.Fatalf("end %v body %q", e, got.body())
	}
	waitClosed(t, closed)
}

// TestExecuteStreamCancelClosesUpstream: canceling the RPC mid-body
// cancels the upstream request; the upstream sees its connection closed.
func TestExecuteStreamCancelClosesUpstream(t *testing.T) {
	up, closed := closingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			flush(w, "tick\n")
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	f := startExecBroker(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunks := 0
	got := streamCall(ctx, t, f.client, get(up.URL), func(m *rbv1.ExecuteStreamResponse) {
		if m.GetChunk() != nil {
			if chunks++; chunks == 3 {
				cancel()
			}
		}
	})
	if status.Code(got.err) != codes.Canceled {
		t.Fatalf("err %v, want CANCELED", got.err)
	}
	waitClosed(t, closed)
}

// TestExecuteStreamMaxConcurrent: one stream more than the policy's
// stream.max_concurrent answers RESOURCE_EXHAUSTED; a slot freed is taken
// again.
func TestExecuteStreamMaxConcurrent(t *testing.T) {
	release := make(chan struct{})
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		flush(w, "open")
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	f := startExecBroker(t, func(p *tenant.Policy) { p.Stream.MaxConcurrent = 1 })
	first, err := f.client.ExecuteStream(t.Context(), get(up.URL))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := first.Recv(); err != nil || m.GetHead() == nil {
		t.Fatalf("first stream: %v %v", m, err)
	}
	second := streamCall(t.Context(), t, f.client, get(up.URL), nil)
	if status.Code(second.err) != codes.ResourceExhausted || !strings.Contains(status.Convert(second.err).Message(), "max_concurrent") {
		t.Fatalf("second stream: %v", second.err)
	}
	close(release)
	for {
		if _, err := first.Recv(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
	}
	third := streamCall(t.Context(), t, f.client, get(up.URL), nil)
	if third.err != nil || !third.end().GetBodyComplete() {
		t.Fatalf("third stream: %v %v", third.err, third.end())
	}
}

// TestExecuteStreamSlotFreeAtEnd: a caller that opens its next stream as
// soon as it reads end (not waiting for the RPC's status) is never
// refused for the stream it just finished: the slot is given back before
// end is sent. The server's goroutine pauses for 200 ms after it sent end
// (as a busy machine may deschedule it there); under stream.max_concurrent
// 1 the next stream still opens. (The suite's time-to-first-byte rows, 64
// callers under a limit of 64, were refused this way.)
func TestExecuteStreamSlotFreeAtEnd(t *testing.T) {
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: one\n\n")
	})
	pauseAfterEnd := grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, pausingStream{ss})
	})
	client := startExecBrokerWith(t, func(p *tenant.Policy) { p.Stream.MaxConcurrent = 1 },
		server.GRPCConfig{ExtraOptions: []grpc.ServerOption{pauseAfterEnd}}).client
	for i := range 3 {
		s, err := client.ExecuteStream(t.Context(), get(up.URL))
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err) // RESOURCE_EXHAUSTED: the last one still held its slot
			}
			if end := m.GetEnd(); end != nil {
				if !end.GetBodyComplete() {
					t.Fatalf("stream %d: %v", i, end)
				}
				break
			}
		}
	}
}

// pausingStream pauses its goroutine for 200 ms after it sent an end.
type pausingStream struct{ grpc.ServerStream }

func (p pausingStream) SendMsg(m any) error {
	err := p.ServerStream.SendMsg(m)
	if r, ok := m.(*rbv1.ExecuteStreamResponse); ok && r.GetEnd() != nil {
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// TestExecuteStreamMaxBytes: the policy's byte cap ends the body with
// BODY_END_SIZE_LIMIT after exactly that many bytes.
func TestExecuteStreamMaxBytes(t *testing.T) {
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("m", 70_000))
	})
	f := startExecBroker(t, func(p *tenant.Policy) { p.Stream.MaxBytes = 50_000 })
	got := streamCall(t.Context(), t, f.client, get(up.URL), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if e := got.end(); e.GetBodyComplete() || e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_SIZE_LIMIT || e.GetBodyBytes() != 50_000 || len(got.body()) != 50_000 || e.GetErrorMessage() == "" {
		t.Fatalf("end %v, %d bytes", e, len(got.body()))
	}
}

// TestExecuteStreamDrain: the broker's drain deadline cuts a stream with
// BODY_END_SHUTTING_DOWN and OUTCOME_SHUTTING_DOWN.
func TestExecuteStreamDrain(t *testing.T) {
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for {
			flush(w, "x")
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	runner := engine.NewRunner(st)
	client := startBroker(t, server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: runner, Clients: clients}))
	var once sync.Once
	got := streamCall(t.Context(), t, client, get(up.URL), func(m *rbv1.ExecuteStreamResponse) {
		if m.GetChunk() != nil {
			once.Do(func() { runner.Drain(time.Now().Add(100 * time.Millisecond)) })
		}
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if e := got.end(); e.GetBodyEnd() != rbv1.BodyEnd_BODY_END_SHUTTING_DOWN || e.GetOutcome() != rbv1.Outcome_OUTCOME_SHUTTING_DOWN || e.GetBodyComplete() {
		t.Fatalf("end %v", e)
	}
}

// TestExecuteStreamKeepsSecretsOutOfLogs: the call's log line names the
// method and its status, never the request's headers, URL query or body.
func TestExecuteStreamKeepsSecretsOutOfLogs(t *testing.T) {
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "payload")
	})
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	var logs proctest.Buffer
	svc := server.New(server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: engine.NewRunner(nil), Clients: clients}))
	client := serve(t, svc, server.GRPCConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := get(up.URL + "/?api_key=sekrit")
	req.Request.Headers = []*rbv1.HttpHeader{{Name: "Authorization", Value: "Bearer sekrit"}}
	got := streamCall(t.Context(), t, client, req, nil)
	if got.err != nil || got.body() != "payload" {
		t.Fatalf("err %v body %q", got.err, got.body())
	}
	var out string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if out = logs.String(); strings.Contains(out, "ExecuteStream") {
			break
		}
	}
	if !strings.Contains(out, "ExecuteStream") {
		t.Fatalf("no log line for the call: %s", out)
	}
	if strings.Contains(out, "sekrit") || strings.Contains(out, "payload") {
		t.Fatalf("logs leak the request or body: %s", out)
	}
}
