package server

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// TestSplicedResponseDecodesAsTheMessage: an Execute response marshalled
// with its body in place (no copy) decodes to the same message, and the
// body in the encoding is the engine's own buffer.
func TestSplicedResponseDecodesAsTheMessage(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 10<<10)
	res := &engine.Result{
		Outcome:    engine.OutcomeSuccess,
		Response:   &engine.FinalResponse{Status: 200, Header: http.Header{"A": {"1", "2"}, "B": {"3"}}, Body: body, Truncated: true},
		Attempts:   []engine.AttemptRecord{{Number: 1, Start: time.Unix(5, 6), Status: 200, Decision: engine.Decision{Action: engine.ActionDoNotRetry, Reason: engine.ReasonSuccess}}},
		RetryAfter: time.Second, HasRetryAfter: true,
	}
	m := resultToProto(res, "github")
	bs, err := newRawCodec().Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || &bs[1].ReadOnlyData()[0] != &body[0] {
		t.Fatalf("the body was copied (%d buffers)", len(bs))
	}
	var got rbv1.ExecuteResponse
	if err := proto.Unmarshal(bs.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, m) {
		t.Fatalf("decoded %v, want %v", &got, m)
	}
	if want, _ := proto.Marshal(m); len(want) != bs.Len() {
		t.Errorf("spliced %d bytes, proto.Marshal %d", bs.Len(), len(want))
	}
	if len(m.GetResponse().GetBody()) != len(body) {
		t.Error("the message lost its body")
	}
}
