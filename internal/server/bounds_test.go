package server_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// TestHeadsOverTheCapNeverExhaustTheSendLimit (issue 17, defect 3): an 8
// MiB header with a 60 MiB body went through to the caller's response, and
// the call failed with RESOURCE_EXHAUSTED (71,303,289 vs 69,206,016) after
// the upstream call was made. Now the head is a transport error of its own
// kind, retried by the rules, and the call answers a result; a head just
// within the caps with the largest body fits the send limit.
func TestHeadsOverTheCapNeverExhaustTheSendLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 250 MiB")
	}
	f := startExecBroker(t, func(p *tenant.Policy) {
		p.MaxResponseBody = engine.MaxBodyLimit
		p.MaxRetries = 1
		p.Backoff.Base, p.Backoff.Cap = time.Millisecond, time.Millisecond
	})
	big := bytes.Repeat([]byte("x"), engine.MaxBodyLimit)
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/over":
			w.Header().Set("X-Big", strings.Repeat("h", 8<<20))
			_, _ = w.Write(big[:60<<20])
		case "/within":
			// The worst head for the message within the caps: as many
			// lines as allowed, short, then one value taking the bytes
			// left (net/http adds Content-Type and Date).
			lines := egress.MaxResponseHeaderLines - 3
			for i := range lines {
				w.Header().Add("X", strconv.Itoa(i%10))
			}
			w.Header().Set("Y", strings.Repeat("h", egress.MaxResponseHeaderBytes-8*lines-8<<10))
			_, _ = w.Write(big)
		}
	})
	opts := []grpc.CallOption{grpc.MaxCallRecvMsgSize(1 << 30)}

	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/over"}}, opts...)
	if err != nil {
		t.Fatalf("head over the cap: %v, want a result", err)
	}
	if n := len(resp.GetAttempts()); n != 2 {
		t.Errorf("%d attempts, want 2 (the kind is retryable)", n)
	}
	for _, a := range resp.GetAttempts() {
		if a.GetTransportError() != rbv1.TransportError_TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE || a.GetStatusCode() != 0 {
			t.Errorf("attempt %d: %s status %d, want TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE", a.GetNumber(), a.GetTransportError(), a.GetStatusCode())
		}
	}
	if resp.GetResponse() != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_ATTEMPTS_EXHAUSTED {
		t.Errorf("outcome %s, response %v", resp.GetOutcome(), resp.GetResponse() != nil)
	}

	resp, err = f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/within"}}, opts...)
	if err != nil {
		t.Fatalf("head within the caps with a %d-byte body: %v", engine.MaxBodyLimit, err)
	}
	if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(resp.GetResponse().GetBody()) != engine.MaxBodyLimit {
		t.Fatalf("outcome %s, %d body bytes", resp.GetOutcome(), len(resp.GetResponse().GetBody()))
	}
	size := proto.Size(resp)
	t.Logf("largest response: %d bytes, %d header lines; send limit %d", size, len(resp.GetResponse().GetHeaders()), server.MaxSendMsgSize)
	if size > server.MaxSendMsgSize {
		t.Errorf("response of %d bytes over the send limit %d", size, server.MaxSendMsgSize)
	}
}

// TestWorstResponseFitsTheSendLimit: the largest Execute response the
// server can build (largest body, the head at both caps in its costliest
// shape, every attempt a policy allows with the longest error message)
// fits MaxSendMsgSize.
func TestWorstResponseFitsTheSendLimit(t *testing.T) {
	res := &engine.Result{Outcome: engine.OutcomeSuccess, Response: &engine.FinalResponse{Status: 200, Header: http.Header{}, Body: make([]byte, engine.MaxBodyLimit)}}
	h := res.Response.Header
	for i := range egress.MaxResponseHeaderLines - 1 {
		h.Add("A", strconv.Itoa(i%10))
	}
	h.Set("B", strings.Repeat("v", egress.MaxResponseHeaderBytes-2*(egress.MaxResponseHeaderLines-1)-1))
	name := strings.Repeat("n", 256)
	for i := range engine.MaxRetriesLimit + 1 {
		res.Attempts = append(res.Attempts, engine.AttemptRecord{
			Number: i + 1, Status: 599, Transport: engine.TransportResponseHeadersTooLarge, Error: strings.Repeat("é", 4<<10),
			Decision: engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonServerHint, Delay: 1 << 62, Hint: 1 << 62, HasHint: true, HintSource: name, Rule: name},
			Waited:   1 << 62, Duration: 1 << 62,
		})
	}
	size := proto.Size(server.ResultToProto(res, name))
	t.Logf("worst response %d bytes, limit %d", size, server.MaxSendMsgSize)
	if size > server.MaxSendMsgSize {
		t.Fatalf("worst response of %d bytes over the send limit %d", size, server.MaxSendMsgSize)
	}
}

// TestBudgetRefusalIsResourceExhausted: a call whose request body plus
// max_response_body cannot fit the broker's body budget answers
// RESOURCE_EXHAUSTED before anything is sent (no RetryInfo: waiting would
// not help); the upstream sees nothing.
func TestBudgetRefusalIsResourceExhausted(t *testing.T) {
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	tr := egress.NewClients(egress.ClientConfig{DialFunc: (&recordingDialer{}).dial})
	t.Cleanup(tr.CloseIdleConnections)
	exec := &server.Executor{Runner: engine.NewRunner(nil, engine.WithBodyBudget(1<<20)), Clients: tr} // under the default 4 MiB
	client := startBroker(t, server.WithDefaultTenant(dev), server.WithExecutor(exec))
	up := newScripted(t, func(int, http.ResponseWriter, *http.Request) {})
	_, err = client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "nothing was sent") {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			t.Error("a call that can never fit carries a RetryInfo")
		}
	}
	if n := up.n.Load(); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
	// Narrowed to fit, the same call goes through.
	small := uint64(512 << 10)
	resp, err := client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}, Overrides: &rbv1.ExecuteOverrides{MaxResponseBody: &small}})
	if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("narrowed call: %v %v", err, resp.GetOutcome())
	}
}
