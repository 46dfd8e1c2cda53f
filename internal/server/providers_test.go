package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/auth"
	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// providersExample is the configuration with operator-defined providers.
const providersExample = "../../testdata/config/providers.yaml"

// slowDownBody is the example API's throttling answer (with a 400).
const slowDownBody = `{"error":"slow_down","wait_ms":1500}`

// configBroker is a broker serving a configuration file over gRPC on
// loopback, with API-key authentication, a fake clock, and Execute's
// destinations resolved without DNS (api.corp.example and
// batch.corp.example are 127.0.0.1) and dialled on loopback only.
type configBroker struct {
	client rbv1.BrokerServiceClient
	clock  *engine.FakeClock
	dialer *recordingDialer
}

func startConfigBroker(t *testing.T, path string) *configBroker {
	t.Helper()
	d, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	rd := &recordingDialer{}
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	clients := egress.NewClients(egress.ClientConfig{DialFunc: rd.dial, Resolver: fakeResolver{"api.corp.example": loop, "batch.corp.example": loop}})
	t.Cleanup(clients.CloseIdleConnections)
	exec := &server.Executor{Runner: engine.NewRunner(st, engine.WithClock(clock)), Clients: clients}
	svc := server.New(server.WithExecutor(exec), server.WithPolicyResolver(auth.ResolvePolicy))
	gs, _ := server.NewGRPCServer(svc, server.GRPCConfig{Auth: auth.New(func() *config.Directory { return d })})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &configBroker{client: rbv1.NewBrokerServiceClient(conn), clock: clock, dialer: rd}
}

// as returns ctx authenticated with a tenant's published test key.
func as(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// TestOperatorProviderClassifyOverGRPC: the example's provider decides a
// ClassifyResponse of its throttling answer: retry in exactly 1.5 s, by its
// rule; a tenant's own provider is there for that tenant only.
func TestOperatorProviderClassifyOverGRPC(t *testing.T) {
	b := startConfigBroker(t, providersExample)
	slow := func(provider, url string) *rbv1.ClassifyResponseRequest {
		return &rbv1.ClassifyResponseRequest{
			StatusCode: 400, Method: "GET", Attempt: 1, Provider: provider, Url: url,
			Headers: []*rbv1.HttpHeader{hdr("Content-Type", "application/json")},
			Body:    []byte(slowDownBody),
		}
	}
	teamA, teamB := as(t.Context(), "team-a-secret-key"), as(t.Context(), "team-b-secret-key")
	for _, c := range []struct {
		name string
		ctx  context.Context
		req  *rbv1.ClassifyResponseRequest
		rule string
	}{
		{"the policy's provider", teamA, slow("", ""), "corp-api/slow_down"},
		{"the file's provider by host", teamB, slow("", "https://api.corp.example/v1/items"), "corp-api/slow_down"},
		{"the tenant's provider by host", teamB, slow("", "https://batch.corp.example/v1/jobs"), "corp-batch/slow_down"},
		{"the tenant's provider named", teamB, slow("corp-batch", ""), "corp-batch/slow_down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := b.client.ClassifyResponse(c.ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDecision()
			if d.GetAction() != rbv1.Action_ACTION_RETRY || d.GetDelay().AsDuration() != 1500*time.Millisecond ||
				d.GetHintSource() != "body:wait_ms" || d.GetRule() != c.rule || d.GetReason() != rbv1.Reason_REASON_SERVER_HINT {
				t.Fatalf("decision %v", d)
			}
		})
	}
	// team-b's own rule: a spent daily quota is not retried.
	resp, err := b.client.ClassifyResponse(teamB, &rbv1.ClassifyResponseRequest{StatusCode: 429, Provider: "corp-batch", Body: []byte(`{"error":"daily_quota_exhausted"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetAction() != rbv1.Action_ACTION_DO_NOT_RETRY || d.GetRule() != "corp-batch/daily_quota" || d.GetReason() != rbv1.Reason_REASON_PROVIDER_FORBIDS_RETRY {
		t.Fatalf("daily quota: %v", d)
	}
	// Another response of the API follows the readers and the standard
	// rules.
	resp, err = b.client.ClassifyResponse(teamA, &rbv1.ClassifyResponseRequest{StatusCode: 400, Body: []byte(`{"error":"bad_request"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetAction() != rbv1.Action_ACTION_DO_NOT_RETRY || d.GetRule() != "" || d.GetReason() != rbv1.Reason_REASON_STATUS_NOT_RETRYABLE {
		t.Fatalf("another 400: %v", d)
	}
	// team-a does not see team-b's provider: the override is refused as
	// unknown, naming only what team-a has.
	_, err = b.client.ClassifyResponse(teamA, slow("corp-batch", ""))
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !hasViolation(st, "provider") {
		t.Fatalf("team-a naming team-b's provider: %v", err)
	}
	if msg := st.Message(); !containsAll(msg, `unknown provider "corp-batch"`, "corp-api") || containsAll(msg, "corp-batch,") {
		t.Fatalf("message %q", msg)
	}
}

// TestOperatorProviderExecute: Execute against a loopback upstream that
// answers the example's 400 then 200 retries once, after waiting exactly
// the 1.5 s the body asked for (on the fake clock).
func TestOperatorProviderExecute(t *testing.T) {
	b := startConfigBroker(t, providersExample)
	up := newScripted(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, slowDownBody)
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	for _, c := range []struct {
		name, key, url, rule string
	}{
		{"team-a, its policy's provider", "team-a-secret-key", up.URL + "/v1/items", "corp-api/slow_down"},
		{"team-b, its provider by host", "team-b-secret-key", "http://batch.corp.example:" + up.URL[len("http://127.0.0.1:"):] + "/v1/jobs", "corp-batch/slow_down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up.n.Store(0)
			before := len(b.clock.Sleeps())
			resp, err := b.client.Execute(as(t.Context(), c.key), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: c.url}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || string(resp.GetResponse().GetBody()) != "done" || len(resp.GetAttempts()) != 2 {
				t.Fatalf("outcome %s, %d attempts, body %q", resp.GetOutcome(), len(resp.GetAttempts()), resp.GetResponse().GetBody())
			}
			d := resp.GetAttempts()[0].GetDecision()
			if resp.GetAttempts()[0].GetStatusCode() != 400 || d.GetDelay().AsDuration() != 1500*time.Millisecond || d.GetRule() != c.rule || d.GetHintSource() != "body:wait_ms" {
				t.Fatalf("first attempt %v", resp.GetAttempts()[0])
			}
			if sleeps := b.clock.Sleeps()[before:]; !slices.Equal(sleeps, []time.Duration{1500 * time.Millisecond}) {
				t.Fatalf("slept %v, want exactly [1.5s]", sleeps)
			}
		})
	}
	if n := b.dialer.nonLoopback(); len(n) > 0 {
		t.Fatalf("dialled %v", n)
	}
	// The request's override is checked against team-a's catalog.
	_, err := b.client.Execute(as(t.Context(), "team-a-secret-key"), &rbv1.ExecuteRequest{Provider: "corp-batch", Request: &rbv1.HttpRequest{Url: up.URL}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !hasViolation(st, "provider") {
		t.Fatalf("team-a naming team-b's provider in Execute: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestNotExecutedOverGRPC (issue 18 item 5): a POST that the provider says
// was not executed is retried: the built-in OpenAI and Shopify signals, and
// an operator's marked header and rule. A retry verdict that is not marked
// not_executed leaves a POST unsafe (only the status rule is overridden).
func TestNotExecutedOverGRPC(t *testing.T) {
	b := startConfigBroker(t, providersExample)
	teamA := as(t.Context(), "team-a-secret-key")
	shopifyBody := `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],` +
		`"extensions":{"cost":{"requestedQueryCost":1000,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":624,"restoreRate":50.0}}}}`
	for _, c := range []struct {
		name    string
		req     *rbv1.ClassifyResponseRequest
		action  rbv1.Action
		reason  rbv1.Reason
		delay   time.Duration
		rule    string
		backoff bool
	}{
		{"openai chat completion refused with x-should-retry", &rbv1.ClassifyResponseRequest{
			StatusCode: 429, Method: "POST", Attempt: 1, Provider: "openai", Url: "https://api.openai.com/v1/chat/completions",
			Headers: []*rbv1.HttpHeader{hdr("x-should-retry", "true"), hdr("retry-after-ms", "1200")},
		}, rbv1.Action_ACTION_RETRY, rbv1.Reason_REASON_SERVER_HINT, 1200 * time.Millisecond, "", false},
		{"openai POST without x-should-retry", &rbv1.ClassifyResponseRequest{
			StatusCode: 429, Method: "POST", Attempt: 1, Provider: "openai",
			Headers: []*rbv1.HttpHeader{hdr("retry-after-ms", "1200")},
		}, rbv1.Action_ACTION_DO_NOT_RETRY, rbv1.Reason_REASON_UNSAFE_METHOD, 0, "", false},
		{"shopify graphql POST throttled", &rbv1.ClassifyResponseRequest{
			StatusCode: 200, Method: "POST", Attempt: 1, Provider: "shopify", Url: "https://shop.myshopify.com/admin/api/2025-01/graphql.json",
			Headers: []*rbv1.HttpHeader{hdr("Content-Type", "application/json")}, Body: []byte(shopifyBody),
		}, rbv1.Action_ACTION_RETRY, rbv1.Reason_REASON_SERVER_HINT, 7520 * time.Millisecond, "shopify/graphql_throttled", false},
		{"operator's marked header", &rbv1.ClassifyResponseRequest{
			StatusCode: 409, Method: "POST", Attempt: 1, Headers: []*rbv1.HttpHeader{hdr("x-corp-not-run", "true")},
		}, rbv1.Action_ACTION_RETRY, rbv1.Reason_REASON_BACKOFF, 0, "", true},
		{"operator's unmarked header", &rbv1.ClassifyResponseRequest{
			StatusCode: 409, Method: "POST", Attempt: 1, Headers: []*rbv1.HttpHeader{hdr("x-corp-retryable", "true")},
		}, rbv1.Action_ACTION_DO_NOT_RETRY, rbv1.Reason_REASON_UNSAFE_METHOD, 0, "", false},
		{"operator's unmarked header with an idempotency key", &rbv1.ClassifyResponseRequest{
			StatusCode: 409, Method: "POST", Attempt: 1, Headers: []*rbv1.HttpHeader{hdr("x-corp-retryable", "true")},
			RequestHeaders: []*rbv1.HttpHeader{hdr("Idempotency-Key", "k-1")},
		}, rbv1.Action_ACTION_RETRY, rbv1.Reason_REASON_BACKOFF, 0, "", true},
		{"operator's marked rule", &rbv1.ClassifyResponseRequest{
			StatusCode: 400, Method: "POST", Attempt: 1,
			Headers: []*rbv1.HttpHeader{hdr("Content-Type", "application/json")}, Body: []byte(slowDownBody),
		}, rbv1.Action_ACTION_RETRY, rbv1.Reason_REASON_SERVER_HINT, 1500 * time.Millisecond, "corp-api/slow_down", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := b.client.ClassifyResponse(teamA, c.req)
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDecision()
			if d.GetAction() != c.action || d.GetReason() != c.reason || d.GetRule() != c.rule ||
				(!c.backoff && d.GetDelay().AsDuration() != c.delay) {
				t.Fatalf("decision %v; want %v %v delay %v rule %q", d, c.action, c.reason, c.delay, c.rule)
			}
		})
	}
}
