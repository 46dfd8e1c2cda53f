package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// recordingDialer records every address the transport tries to dial. It
// connects only to loopback; anything else is recorded and refused, so a
// broken guard can never send traffic off this machine.
type recordingDialer struct {
	mu    sync.Mutex
	addrs []string
}

func (d *recordingDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return nil, errors.New("test dialer: refusing non-loopback " + address)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *recordingDialer) nonLoopback() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, a := range d.addrs {
		if ap, err := netip.ParseAddrPort(a); err != nil || !ap.Addr().Unmap().IsLoopback() {
			out = append(out, a)
		}
	}
	return out
}

// fakeResolver maps names to addresses without DNS.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type execFixture struct {
	client rbv1.BrokerServiceClient
	dialer *recordingDialer
	store  *memstore.Store
}

func startExecBroker(t *testing.T, mut func(*tenant.Policy)) *execFixture {
	t.Helper()
	return startExecBrokerWith(t, mut, server.GRPCConfig{})
}

// startExecBrokerWith is startExecBroker with the gRPC server built from cfg.
func startExecBrokerWith(t *testing.T, mut func(*tenant.Policy), cfg server.GRPCConfig) *execFixture {
	t.Helper()
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	if mut != nil {
		p := *dev.Policies["default"]
		mut(&p)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		dev.Policies["default"] = &p
	}
	rd := &recordingDialer{}
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	tr := egress.NewClients(egress.ClientConfig{DialFunc: rd.dial, Resolver: fakeResolver{
		"internal.example": {netip.MustParseAddr("10.1.2.3")},
		"local.example":    {netip.MustParseAddr("127.0.0.1")},
	}})
	t.Cleanup(tr.CloseIdleConnections)
	exec := &server.Executor{Runner: engine.NewRunner(st), Clients: tr}
	client := serveBroker(t, server.New(server.WithDefaultTenant(dev), server.WithExecutor(exec)), cfg)
	return &execFixture{client: client, dialer: rd, store: st}
}

type scripted struct {
	*httptest.Server
	n atomic.Int32
}

func newScripted(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *scripted {
	s := &scripted{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(int(s.n.Add(1)), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestExecuteOverGRPC(t *testing.T) {
	f := startExecBroker(t, nil)
	up := newScripted(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			return
		}
		w.Header().Add("X-Dup", "a")
		w.Header().Add("X-Dup", "b")
		_, _ = io.WriteString(w, "hello "+r.Header.Get("X-Caller"))
	})
	begin := time.Now()
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{
		Url: up.URL + "/x", Headers: []*rbv1.HttpHeader{{Name: "X-Caller", Value: "svc"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || resp.GetResponse().GetStatusCode() != 200 || string(resp.GetResponse().GetBody()) != "hello svc" {
		t.Fatalf("outcome %s status %d body %q", resp.GetOutcome(), resp.GetResponse().GetStatusCode(), resp.GetResponse().GetBody())
	}
	if len(resp.GetAttempts()) != 2 || time.Since(begin) < time.Second {
		t.Fatalf("%d attempts in %v", len(resp.GetAttempts()), time.Since(begin))
	}
	a1 := resp.GetAttempts()[0]
	if a1.GetStatusCode() != 503 || a1.GetDecision().GetDelay().AsDuration() != time.Second || a1.GetDecision().GetHintSource() != "retry-after" {
		t.Fatalf("attempt 1 %+v", a1)
	}
	var dups []string
	for _, h := range resp.GetResponse().GetHeaders() {
		if h.GetName() == "X-Dup" {
			dups = append(dups, h.GetValue())
		}
	}
	if strings.Join(dups, ",") != "a,b" {
		t.Fatalf("duplicate headers %v, want [a b] in order", dups)
	}
}

func TestExecuteBodyOverLimitRefusedBeforeSending(t *testing.T) {
	f := startExecBroker(t, func(p *tenant.Policy) { p.MaxRequestBody = 16 })
	up := newScripted(t, func(int, http.ResponseWriter, *http.Request) {})
	_, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{
		Method: "PUT", Url: up.URL, Body: make([]byte, 17),
	}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "request.body") {
		t.Fatalf("err = %v, want INVALID_ARGUMENT on request.body", err)
	}
	if up.n.Load() != 0 || len(f.dialer.addrs) != 0 {
		t.Fatalf("upstream saw %d requests, %d dials; nothing may be sent", up.n.Load(), len(f.dialer.addrs))
	}
}

func TestExecuteRefusedDestinations(t *testing.T) {
	f := startExecBroker(t, nil)
	for _, u := range []string{
		"http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:8080/",
		"http://internal.example/", "http://[fd00:ec2::254]/", "http://2130706433/", "http://0x7f.1/",
	} {
		t.Run(u, func(t *testing.T) {
			_, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: u}})
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("err = %v, want PERMISSION_DENIED", err)
			}
		})
	}
	if got := f.dialer.nonLoopback(); len(got) != 0 {
		t.Fatalf("dialled %v; a refused destination must open no connection", got)
	}
	if len(f.dialer.addrs) != 0 {
		t.Fatalf("dialled %v", f.dialer.addrs)
	}
}

func TestExecuteRejectsBadRequests(t *testing.T) {
	f := startExecBroker(t, nil)
	max := uint32(9)
	big := uint64(1 << 40)
	wrapping := uint64(1 << 63) // int64(wrapping) < 0: must not wrap into "below the policy"
	huge := ^uint64(0)
	zeroBody := uint64(0)
	tests := []struct {
		name  string
		req   *rbv1.ExecuteRequest
		code  codes.Code
		field string
	}{
		{"no request", &rbv1.ExecuteRequest{}, codes.InvalidArgument, "request"},
		{"no url", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{}}, codes.InvalidArgument, "request.url"},
		{"relative url", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "/x"}}, codes.InvalidArgument, "request.url"},
		{"file url", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "file:///etc/passwd"}}, codes.InvalidArgument, "request.url"},
		{"bad method", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Method: "G E T"}}, codes.InvalidArgument, "request.method"},
		{"host header", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "host", Value: "evil"}}}}, codes.InvalidArgument, "request.headers[0].name"},
		{"transfer-encoding", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "Transfer-Encoding", Value: "chunked"}}}}, codes.InvalidArgument, "request.headers[0].name"},
		{"header injection", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "X-A", Value: "1\r\nX-B: 2"}}}}, codes.InvalidArgument, "request.headers[0].value"},
		{"unknown provider", &rbv1.ExecuteRequest{Provider: "friendster", Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "provider"},
		{"retries above policy", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxRetries: &max}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_retries"},
		{"max delay above policy", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxDelay: durationpb.New(time.Hour)}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_delay"},
		{"negative timeout", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{TotalTimeout: durationpb.New(-time.Second)}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.total_timeout"},
		{"response body above policy", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxResponseBody: &big}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_response_body"},
		{"unknown policy", &rbv1.ExecuteRequest{Policy: "ghost", Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.FailedPrecondition, ""},
		{"response body 2^63", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxResponseBody: &wrapping}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_response_body"},
		{"response body 2^64-1", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxResponseBody: &huge}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_response_body"},
		{"response body 0", &rbv1.ExecuteRequest{Overrides: &rbv1.ExecuteOverrides{MaxResponseBody: &zeroBody}, Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/"}}, codes.InvalidArgument, "overrides.max_response_body"},
		{"control char in value", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "X-A", Value: "a\x01b"}}}}, codes.InvalidArgument, "request.headers[0].value"},
		{"escape in value", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "X-A", Value: "\x1b[31m"}}}}, codes.InvalidArgument, "request.headers[0].value"},
		{"DEL in value", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "X-A", Value: "a\x7fb"}}}}, codes.InvalidArgument, "request.headers[0].value"},
		{"port 0", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:0/"}}, codes.InvalidArgument, "request.url"},
		{"port 65536", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:65536/"}}, codes.InvalidArgument, "request.url"},
		{"empty port", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:/"}}, codes.InvalidArgument, "request.url"},
		{"secret in header name", &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1/", Headers: []*rbv1.HttpHeader{{Name: "Authorization: Bearer s3cr3t", Value: "x"}}}}, codes.InvalidArgument, "request.headers[0].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.client.Execute(t.Context(), tt.req)
			st := status.Convert(err)
			if st.Code() != tt.code {
				t.Fatalf("code %s (%q), want %s", st.Code(), st.Message(), tt.code)
			}
			if tt.field != "" && !hasViolation(st, tt.field) {
				t.Fatalf("no violation for %s in %q", tt.field, st.Message())
			}
			if strings.Contains(st.Message(), "s3cr3t") {
				t.Fatalf("the message repeats a secret: %q", st.Message())
			}
		})
	}
	if len(f.dialer.addrs) != 0 {
		t.Fatalf("invalid requests dialled %v", f.dialer.addrs)
	}
}

func hasViolation(st *status.Status, field string) bool {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				if fv.GetField() == field {
					return true
				}
			}
		}
	}
	return false
}

func TestExecuteOverridesNarrowThePolicy(t *testing.T) {
	f := startExecBroker(t, nil)
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
	zero := uint32(0)
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{
		Overrides: &rbv1.ExecuteOverrides{MaxRetries: &zero},
		Request:   &rbv1.HttpRequest{Url: up.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetAttempts()) != 1 || resp.GetOutcome() != rbv1.Outcome_OUTCOME_ATTEMPTS_EXHAUSTED || up.n.Load() != 1 {
		t.Fatalf("%d attempts, outcome %s, %d sends", len(resp.GetAttempts()), resp.GetOutcome(), up.n.Load())
	}
}

func TestExecutePacingResourceExhausted(t *testing.T) {
	f := startExecBroker(t, func(p *tenant.Policy) { p.Pace = store.PaceConfig{Rate: 0.01, Burst: 1} })
	up := newScripted(t, func(int, http.ResponseWriter, *http.Request) {})
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}}
	if _, err := f.client.Execute(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := f.client.Execute(ctx, req)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("code %s (%q), want RESOURCE_EXHAUSTED", st.Code(), st.Message())
	}
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay < 90*time.Second {
		t.Fatalf("RetryInfo delay %v, want about 100s", delay)
	}
	if up.n.Load() != 1 {
		t.Fatalf("upstream saw %d calls, want 1", up.n.Load())
	}
}

// TestClassifySharesGatesWithExecute: a caller that made its own call tells
// ClassifyResponse about a 429 with a long hint; Execute for the same
// destination then spends no upstream call.
func TestClassifySharesGatesWithExecute(t *testing.T) {
	f := startExecBroker(t, nil)
	up := newScripted(t, func(int, http.ResponseWriter, *http.Request) {})
	cr, err := f.client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{
		StatusCode: 429, Url: up.URL + "/a", Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "300"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cr.GetDecision().GetReason() != rbv1.Reason_REASON_HINT_EXCEEDS_MAX_DELAY {
		t.Fatalf("classify reason %s", cr.GetDecision().GetReason())
	}
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED || up.n.Load() != 0 {
		t.Fatalf("outcome %s, upstream saw %d", resp.GetOutcome(), up.n.Load())
	}
	if ra := resp.GetRetryAfter().AsDuration(); ra < 290*time.Second || ra > 300*time.Second {
		t.Fatalf("retry_after %v, want about 300s", ra)
	}
	// A later classify for a 503 on the same destination is told to wait
	// out the gate rather than back off.
	cr, err = f.client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{StatusCode: 503, Url: up.URL + "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.GetDecision().GetReason() != rbv1.Reason_REASON_GATE_CLOSED || cr.GetDecision().GetAction() != rbv1.Action_ACTION_DO_NOT_RETRY {
		t.Fatalf("classify during a closed gate: %v", cr.GetDecision())
	}
}

func TestExecuteAllowHosts(t *testing.T) {
	f := startExecBroker(t, func(p *tenant.Policy) { p.AllowHosts = []string{"local.example"} })
	up := newScripted(t, func(int, http.ResponseWriter, *http.Request) {})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://local.example:" + port + "/"}})
	if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("allowed host: %v %v", err, resp.GetOutcome())
	}
	_, err = f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("host outside allow_hosts: %v, want PERMISSION_DENIED", err)
	}
	if up.n.Load() != 1 {
		t.Fatalf("upstream saw %d calls, want 1", up.n.Load())
	}
}

// TestExecuteWaitsForASlowHeadAsLongAsTheAttemptAllows: the attempt's
// attempt_timeout alone bounds the wait for the upstream's head. The
// transport used to add a fixed 30 s bound of its own, which cut a model
// that takes 31 s to answer under attempt_timeout 45s (the attempt failed
// with a transport timeout the policy never asked for).
func TestExecuteWaitsForASlowHeadAsLongAsTheAttemptAllows(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 31 s")
	}
	t.Parallel()
	const head = 31 * time.Second
	f := startExecBroker(t, func(p *tenant.Policy) {
		p.AttemptTimeout, p.TotalTimeout, p.MaxRetries = 45*time.Second, 50*time.Second, 0
	})
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(head):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "slow but whole")
	})
	begin := time.Now()
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/slow"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || string(resp.GetResponse().GetBody()) != "slow but whole" || len(resp.GetAttempts()) != 1 {
		t.Fatalf("after %v: outcome %s, %d attempts, last %+v; want the one attempt's 200", time.Since(begin), resp.GetOutcome(), len(resp.GetAttempts()), resp.GetAttempts())
	}
	if took := time.Since(begin); took < head {
		t.Fatalf("answered after %v, before the upstream's head (%v)", took, head)
	}
}

// TestExecuteAnswersOfConcurrentCallsStayApart: the gRPC handler encodes
// each Execute answer from a block it then gives back to a pool for the
// next call (server.executeHandler). Many callers at once, with answers of
// every shape the block holds (up to six header lines in place and more
// beside it, one attempt and two, small bodies and bodies sent in place, a
// retry_after or none, a response or none), each get their own answer,
// whole and with nothing of another's: under the race detector a block
// reused while still read would show here, and a block given back with
// another call's fields in it would leak them into the next answer.
func TestExecuteAnswersOfConcurrentCallsStayApart(t *testing.T) {
	f := startExecBroker(t, nil)
	var seen sync.Map // ids whose first attempt was answered already
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Id")
		n, _ := strconv.Atoi(id)
		if n%7 == 0 {
			if _, again := seen.LoadOrStore(id, true); !again {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(503)
				return
			}
		}
		w.Header().Set("X-Id", id)
		for k := range n % 10 {
			w.Header().Add("X-Line", id+"-"+strconv.Itoa(k))
		}
		_, _ = io.WriteString(w, ownBody(n))
	})
	// limited says "wait an hour": its first answer closes its gate, and
	// every later call to it is answered from the gate, with no response.
	limited := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(429)
	})
	const callers, calls = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				n := c*calls + i + 1
				target := up.URL
				if n%5 == 0 {
					target = limited.URL
				}
				resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{
					Url: target + "/x", Headers: []*rbv1.HttpHeader{{Name: "X-Id", Value: strconv.Itoa(n)}},
				}})
				if err == nil {
					err = checkOwnAnswer(resp, n)
				}
				if err != nil {
					errs <- fmt.Errorf("call %d: %w", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ownBody is the body of call n: past the size sent in place for every
// 25th call.
func ownBody(n int) string {
	body := "body-" + strconv.Itoa(n)
	if n%25 == 0 {
		body = strings.Repeat(body, 70<<10/len(body))
	}
	return body
}

// checkOwnAnswer checks that resp is the whole answer to call n of
// TestExecuteAnswersOfConcurrentCallsStayApart, and nothing else.
func checkOwnAnswer(resp *rbv1.ExecuteResponse, n int) error {
	r := resp.GetResponse()
	if n%5 == 0 { // the limited upstream
		switch {
		case resp.GetOutcome() == rbv1.Outcome_OUTCOME_SUCCESS || resp.GetRetryAfter() == nil:
			return fmt.Errorf("outcome %s, retry_after %v: want the gate's wait", resp.GetOutcome(), resp.GetRetryAfter())
		case r == nil && len(resp.GetAttempts()) != 0, r != nil && (r.GetStatusCode() != 429 || len(resp.GetAttempts()) != 1 || len(r.GetBody()) != 0):
			return fmt.Errorf("response %v after %d attempts: want none, or the 429 alone", r, len(resp.GetAttempts()))
		}
		return nil
	}
	id := strconv.Itoa(n)
	wantAttempts := 1
	if n%7 == 0 {
		wantAttempts = 2
	}
	var lines []string
	gotID := ""
	for _, h := range r.GetHeaders() {
		switch h.GetName() {
		case "X-Line":
			lines = append(lines, h.GetValue())
		case "X-Id":
			gotID = h.GetValue()
		}
	}
	var want []string
	for k := range n % 10 {
		want = append(want, id+"-"+strconv.Itoa(k))
	}
	switch {
	case resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || r.GetStatusCode() != 200:
		return fmt.Errorf("outcome %s, status %d", resp.GetOutcome(), r.GetStatusCode())
	case string(r.GetBody()) != ownBody(n):
		return fmt.Errorf("another body (%d bytes)", len(r.GetBody()))
	case gotID != id || !slices.Equal(lines, want):
		return fmt.Errorf("header X-Id %q, lines %v; want %q, %v", gotID, lines, id, want)
	case len(resp.GetAttempts()) != wantAttempts:
		return fmt.Errorf("%d attempts, want %d", len(resp.GetAttempts()), wantAttempts)
	case resp.GetRetryAfter() != nil:
		return fmt.Errorf("a retry_after (%v) on a success", resp.GetRetryAfter().AsDuration())
	}
	for i, a := range resp.GetAttempts() {
		if int(a.GetNumber()) != i+1 || a.GetStartTime() == nil || a.GetDecision() == nil {
			return fmt.Errorf("attempt %d incomplete: %v", i+1, a)
		}
	}
	return nil
}
