package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

const providersConfig = "../../testdata/config/providers.yaml"

// slowDown is the example API's throttling body, sent with a 400.
const slowDown = `{"error":"slow_down","wait_ms":1500}`

// TestOperatorProviderE2E runs the example of docs/providers.md through a
// real broker process: ClassifyResponse of the API's 400 decides a retry
// in 1.5 s by the operator's rule, and Execute against a loopback upstream
// that answers that 400 and then 200 waits the 1.5 s before retrying.
func TestOperatorProviderE2E(t *testing.T) {
	p := startProc(t, "--config", providersConfig)
	a := withKey(t.Context(), "team-a-secret-key")
	resp, err := p.client.ClassifyResponse(a, &rbv1.ClassifyResponseRequest{
		StatusCode: 400, Headers: []*rbv1.HttpHeader{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(slowDown),
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetAction() != rbv1.Action_ACTION_RETRY || d.GetDelay().AsDuration() != 1500*time.Millisecond ||
		d.GetRule() != "corp-api/slow_down" || d.GetHintSource() != "body:wait_ms" {
		t.Fatalf("ClassifyResponse: %v", d)
	}

	up := newCountingUpstream(t, func(n int32, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, slowDown)
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	begin := time.Now()
	res, err := p.client.Execute(a, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/v1/items"}})
	elapsed := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(res.GetAttempts()) != 2 || up.n.Load() != 2 || string(res.GetResponse().GetBody()) != "done" {
		t.Fatalf("Execute: outcome %s after %d attempts (%d upstream calls)", res.GetOutcome(), len(res.GetAttempts()), up.n.Load())
	}
	if d := res.GetAttempts()[0].GetDecision(); d.GetDelay().AsDuration() != 1500*time.Millisecond || d.GetRule() != "corp-api/slow_down" {
		t.Fatalf("first attempt's decision: %v", d)
	}
	// The wait is real here: a lower bound cannot flake.
	if elapsed < 1500*time.Millisecond {
		t.Fatalf("the retry came after %v, before the 1.5 s the API asked for", elapsed)
	}
	// team-b's own provider is not team-a's.
	_, err = p.client.ClassifyResponse(a, &rbv1.ClassifyResponseRequest{StatusCode: 400, Provider: "corp-batch"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("team-a naming team-b's provider: %v", err)
	}
}

// TestOperatorProviderReload: a reload that breaks a provider keeps the
// last good configuration; fixing it applies the new rule.
func TestOperatorProviderReload(t *testing.T) {
	good, err := os.ReadFile(providersConfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	write := func(content string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(string(good))
	p := startProc(t, "--config", path)
	a := withKey(t.Context(), "team-a-secret-key")
	classify := func() time.Duration {
		resp, err := p.client.ClassifyResponse(a, &rbv1.ClassifyResponseRequest{StatusCode: 400, Body: []byte(slowDown)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetDecision().GetHint().AsDuration()
	}
	if d := classify(); d != 1500*time.Millisecond {
		t.Fatalf("before reloads: hint %v", d)
	}
	write(strings.Replace(string(good), `when: body.error == "slow_down"`, `when: body.eror == "slow_down" &&`, 1))
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.logs.String(), "providers.corp-api.rules[0].when") })
	if d := classify(); d != 1500*time.Millisecond {
		t.Fatalf("after a bad reload: hint %v, want the last good rule's 1.5s", d)
	}
	write(strings.Replace(string(good), "unit: ms", "unit: s", 1))
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return classify() == 1500*time.Second })
}
