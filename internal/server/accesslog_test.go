package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/server"
)

// logProbe answers as its request's method says: "OK", "PANIC" (it
// panics), or a gRPC code's name after a 60 ms wait ("Internal",
// "Unavailable", "InvalidArgument").
type logProbe struct {
	rbv1.UnimplementedBrokerServiceServer
}

const probeWait = 60 * time.Millisecond

func probeAnswer(method string) error {
	switch method {
	case "OK":
		return nil
	case "PANIC":
		panic("the probe panics")
	}
	time.Sleep(probeWait)
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == method {
			return status.Error(c, "probe says "+method)
		}
	}
	return status.Error(codes.Unknown, "no such code "+method)
}

func (logProbe) ClassifyResponse(_ context.Context, req *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	if err := probeAnswer(req.GetMethod()); err != nil {
		return nil, err
	}
	return &rbv1.ClassifyResponseResponse{Decision: &rbv1.Decision{}}, nil
}

func (logProbe) ExecuteStream(req *rbv1.ExecuteRequest, _ rbv1.BrokerService_ExecuteStreamServer) error {
	return probeAnswer(req.GetRequest().GetMethod())
}

// finished returns the "finished call" lines logged to buf so far,
// decoded.
func finished(t *testing.T, buf *proctest.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "finished call" {
			out = append(out, m)
		}
	}
	return out
}

// callProbe makes one call of kind ("unary" or "stream") answered as
// method says, and checks its code.
func callProbe(t *testing.T, cl rbv1.BrokerServiceClient, kind, method string) {
	t.Helper()
	var err error
	if kind == "unary" {
		_, err = cl.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{Method: method})
	} else {
		var st rbv1.BrokerService_ExecuteStreamClient
		if st, err = cl.ExecuteStream(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: method}}); err == nil {
			_, err = st.Recv()
			if err == io.EOF {
				err = nil
			}
		}
	}
	want := method
	if method == "PANIC" {
		want = codes.Internal.String() // the recovery interceptor's answer
	}
	if got := status.Code(err).String(); got != want {
		t.Fatalf("%s %s: code %s (%v)", kind, method, got, err)
	}
}

// The access log: at info every call has its "finished call" line; at
// warn only the calls whose code logs at warn or error do, with the same
// fields, the call's own start time and its whole duration.
func TestAccessLogAtEachLevel(t *testing.T) {
	serve := func(level slog.Level) (rbv1.BrokerServiceClient, *proctest.Buffer) {
		buf := &proctest.Buffer{}
		logger := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level}))
		return serveBroker(t, logProbe{}, server.GRPCConfig{Logger: logger}), buf
	}
	info, infoLog := serve(slog.LevelInfo)
	warn, warnLog := serve(slog.LevelWarn)

	for _, kind := range []string{"unary", "stream"} {
		// At info: one line per call, whatever its code.
		for _, m := range []string{"OK", "InvalidArgument", "Unavailable", "Internal"} {
			callProbe(t, info, kind, m)
		}
		// At warn: OK and InvalidArgument log at info, and are dropped.
		for _, m := range []string{"OK", "InvalidArgument", "Unavailable", "Internal"} {
			callProbe(t, warn, kind, m)
		}
	}
	// The server logs a call after it answered it: wait for the lines.
	deadline := time.Now().Add(5 * time.Second)
	for (len(finished(t, infoLog)) < 8 || len(finished(t, warnLog)) < 4) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	infoLines, warnLines := finished(t, infoLog), finished(t, warnLog)
	if len(infoLines) != 8 || len(warnLines) != 4 {
		t.Fatalf("%d lines at info (want 8), %d at warn (want 4):\n%v\n%v", len(infoLines), len(warnLines), infoLines, warnLines)
	}
	byCall := func(lines []map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, l := range lines {
			out[l["grpc.method_type"].(string)+" "+l["grpc.code"].(string)] = l
		}
		return out
	}
	infoBy, warnBy := byCall(infoLines), byCall(warnLines)
	for _, call := range []string{"unary Unavailable", "unary Internal", "server_stream Unavailable", "server_stream Internal"} {
		w, i := warnBy[call], infoBy[call]
		if w == nil || i == nil {
			t.Fatalf("%s: no line at warn (%v) or at info (%v)", call, w, i)
		}
		if wk, ik := slices.Sorted(maps.Keys(w)), slices.Sorted(maps.Keys(i)); !slices.Equal(wk, ik) {
			t.Errorf("%s: fields at warn %v, at info %v", call, wk, ik)
		}
		for _, k := range []string{"level", "grpc.service", "grpc.method", "grpc.component", "grpc.error", "protocol"} {
			if w[k] != i[k] {
				t.Errorf("%s: %s is %v at warn and %v at info", call, k, w[k], i[k])
			}
		}
		// The duration is the call's (it waited probeWait), not the
		// replay's.
		ms, err := strconv.ParseFloat(w["grpc.time_ms"].(string), 64)
		if err != nil || ms < float64(probeWait.Milliseconds()) || ms > 5000 {
			t.Errorf("%s: grpc.time_ms %v at warn, want at least %d", call, w["grpc.time_ms"], probeWait.Milliseconds())
		}
		// The start time is the call's, in the interceptor's format
		// (whole seconds: the duration above is what tells the call's
		// measures from the replay's, and both come from one place).
		if _, err := time.Parse(time.RFC3339, w["grpc.start_time"].(string)); err != nil {
			t.Errorf("%s: grpc.start_time %v: %v", call, w["grpc.start_time"], err)
		}
	}
	// A panic, recovered into INTERNAL, is logged at warn too.
	callProbe(t, warn, "unary", "PANIC")
	for len(finished(t, warnLog)) < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if lines := finished(t, warnLog); len(lines) != 5 || lines[4]["level"] != "ERROR" || lines[4]["grpc.code"] != "Internal" {
		t.Errorf("after a panic at warn: %v", lines)
	}
	if l := warnBy["unary Internal"]; l["level"] != "ERROR" {
		t.Errorf("INTERNAL at level %v, want ERROR", l["level"])
	}
	if l := warnBy["unary Unavailable"]; l["level"] != "WARN" {
		t.Errorf("UNAVAILABLE at level %v, want WARN", l["level"])
	}
}
