package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// streamUpstream is a loopback HTTP server that reports each closed
// connection on closed.
func streamUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, chan struct{}) {
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

// TestRoundTripperStreamsSSERealBroker: an upstream sends a server-sent
// event every 300ms; through http.Client and the broker's RoundTripper,
// each event is read from resp.Body before the upstream sends the next one
// (the upstream's send times against the reader's receive times).
func TestRoundTripperStreamsSSERealBroker(t *testing.T) {
	t.Parallel()
	const events = 4
	var mu sync.Mutex
	var sent []time.Time
	up, _ := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
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
			flush(w, fmt.Sprintf("data: {\"n\":%d}\n\n", i))
		}
	})
	var results []*broker.Result
	hc := &http.Client{Transport: realClient(t).RoundTripper(broker.OnResult(func(r *broker.Result) { results = append(results, r) }))}
	resp, err := hc.Get(up.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	var got []time.Time
	for i := range events {
		ev, err := readEvent(rd)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		got = append(got, time.Now())
		if want := fmt.Sprintf("data: {\"n\":%d}\n\n", i); ev != want {
			t.Fatalf("event %d = %q, want %q", i, ev, want)
		}
	}
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i+1 < events; i++ {
		if !got[i].Before(sent[i+1]) {
			t.Errorf("event %d read %v after the upstream sent event %d", i, got[i].Sub(sent[i+1]), i+1)
		}
	}
	if len(results) != 1 || results[0].Outcome != broker.OutcomeSuccess || results[0].BodyEnd != broker.BodyEndComplete || results[0].BodyIncomplete {
		t.Fatalf("results %+v", results)
	}
}

func readEvent(rd *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := rd.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

// TestExecuteStreamDownloadRealBroker: a 16 MiB download streams through
// whole (same digest), with its Content-Length, and the trailers arrive
// in resp.Trailer at EOF.
func TestExecuteStreamDownloadRealBroker(t *testing.T) {
	t.Parallel()
	data := make([]byte, 16<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	want := sha256.Sum256(data)
	up, _ := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/trailers" {
			w.Header().Set("Trailer", "X-Checksum")
			flush(w, "chunked body")
			w.Header().Set("X-Checksum", "c0ffee")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		_, _ = w.Write(data)
	})
	c := realClient(t)
	var res *broker.Result
	req, _ := http.NewRequest(http.MethodGet, up.URL+"/blob", nil)
	resp, err := c.ExecuteStream(t.Context(), req, broker.OnResult(func(r *broker.Result) { res = r }))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	_ = resp.Body.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("read %d bytes (err %v), digest match %v", n, err, bytes.Equal(h.Sum(nil), want[:]))
	}
	if resp.ContentLength != int64(len(data)) || resp.Request != req {
		t.Fatalf("ContentLength %d", resp.ContentLength)
	}
	if res == nil || res.BodyBytes != int64(len(data)) || res.BodyEnd != broker.BodyEndComplete || len(res.Attempts) != 1 {
		t.Fatalf("result %+v", res)
	}

	req, _ = http.NewRequest(http.MethodGet, up.URL+"/trailers", nil)
	resp, err = c.ExecuteStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(body) != "chunked body" || resp.Trailer.Get("X-Checksum") != "c0ffee" {
		t.Fatalf("body %q err %v trailer %v", body, err, resp.Trailer)
	}
}

// TestExecuteStreamResetRealBroker: a body the upstream resets fails its
// read with a *BodyError (an io.ErrUnexpectedEOF) after the bytes that
// arrived.
func TestExecuteStreamResetRealBroker(t *testing.T) {
	t.Parallel()
	up, _ := streamUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "10000")
		w.WriteHeader(200)
		flush(w, strings.Repeat("a", 2000))
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	})
	hc := &http.Client{Transport: realClient(t).RoundTripper()}
	resp, err := hc.Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var be *broker.BodyError
	if !errors.As(err, &be) || !errors.Is(err, io.ErrUnexpectedEOF) || be.End != broker.BodyEndUpstreamError || be.Message == "" {
		t.Fatalf("err = %v, want a *BodyError for an upstream error", err)
	}
	if string(body) != strings.Repeat("a", 2000) {
		t.Fatalf("read %d bytes before the error, want 2000", len(body))
	}
	if be.Result == nil || !be.Result.BodyIncomplete || be.Result.Outcome == broker.OutcomeSuccess || len(be.Result.Attempts) != 1 {
		t.Fatalf("result %+v", be.Result)
	}
}

// TestExecuteStreamCloseCancelsRealBroker: closing the body early cancels
// the call; the broker cancels the upstream request, whose connection
// closes. Canceling the context does the same, and the read fails.
func TestExecuteStreamCloseCancelsRealBroker(t *testing.T) {
	t.Parallel()
	up, closed := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
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
	c := realClient(t)
	req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
	resp, err := c.ExecuteStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "tick\n" {
		t.Fatalf("read %q %v", buf, err)
	}
	_ = resp.Body.Close()
	waitClosed(t, closed)
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("read after Close succeeded")
	}

	ctx, cancel := context.WithCancel(t.Context())
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	resp, err = (&http.Client{Transport: c.RoundTripper()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	waitClosed(t, closed)
}

// TestExecuteStreamErrorsRealBroker: the errors before a response are
// Execute's.
func TestExecuteStreamErrorsRealBroker(t *testing.T) {
	t.Parallel()
	c := realClient(t)
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	var res *broker.Result
	_, err = c.ExecuteStream(t.Context(), req, broker.MaxRetries(0), broker.OnResult(func(r *broker.Result) { res = r }))
	var te *broker.TransportError
	if !errors.As(err, &te) || te.Kind != broker.KindConnectionRefused || res == nil || res.BodyEnd != broker.BodyEndNoResponse {
		t.Fatalf("err = %v, result %+v", err, res)
	}
	_, port, _ := net.SplitHostPort(addr)
	req, _ = http.NewRequest(http.MethodGet, "http://127.0.0.2:"+port+"/", nil) // loopback, but not allowed
	if _, err := c.ExecuteStream(t.Context(), req); !broker.IsPermissionDenied(err) {
		t.Fatalf("err = %v, want PERMISSION_DENIED", err)
	}
}

// TestExecuteStreamIdleTimeout: with a policy whose stream idle timeout is
// 200ms (a broker served in this process: the command's dev tenant keeps
// the 60s default), an upstream that goes quiet fails the read with
// BodyEndIdleTimeout and its connection is closed.
func TestExecuteStreamIdleTimeout(t *testing.T) {
	up, closed := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		flush(w, "data: 1\n\n")
		<-r.Context().Done()
	})
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	dev.Policies["default"].Stream.IdleTimeout = 200 * time.Millisecond
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	svc := server.New(server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: engine.NewRunner(nil), Clients: clients}))
	gs, _ := server.NewGRPCServer(svc, server.GRPCConfig{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	c, err := broker.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	resp, err := (&http.Client{Transport: c.RoundTripper()}).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var be *broker.BodyError
	if !errors.As(err, &be) || be.End != broker.BodyEndIdleTimeout || string(body) != "data: 1\n\n" {
		t.Fatalf("body %q err %v", body, err)
	}
	waitClosed(t, closed)
}
