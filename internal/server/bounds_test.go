package server_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
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
