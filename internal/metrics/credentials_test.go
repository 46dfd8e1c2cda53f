package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCredentialMetrics: the four credential series, and the problems kept
// for the health detail: set by CredentialUnavailable (the latest cause,
// the first time), cleared by CredentialApplied.
func TestCredentialMetrics(t *testing.T) {
	m := New()
	m.TokenFetch("t1", "oa", "ok")
	m.TokenExpiry("t1", "oa", 90*time.Second)
	m.FileReload("t1", "hdr", "ok")
	m.FileReload("t1", "hdr", "error")
	m.CredentialApplied("t1", "hdr") // nothing to clear
	m.CredentialUnavailable("t1", "oa", errors.New("credential oa unavailable: token endpoint answered 503"))
	m.CredentialUnavailable("t1", "oa", errors.New("credential oa unavailable: timeout"))
	m.CredentialUnavailable("t2", "x", errors.New("credential x unavailable: gone"))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`retrybroker_credential_token_fetches_total{credential="oa",result="ok",tenant="t1"} 1`,
		`retrybroker_credential_token_expiry_seconds{credential="oa",tenant="t1"} 90`,
		`retrybroker_credential_file_reloads_total{credential="hdr",result="ok",tenant="t1"} 1`,
		`retrybroker_credential_file_reloads_total{credential="hdr",result="error",tenant="t1"} 1`,
		`retrybroker_credential_unavailable_total{credential="oa",tenant="t1"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	ps := m.CredentialProblems()
	if len(ps) != 2 || ps[0].Tenant != "t1" || ps[0].Credential != "oa" || ps[0].Cause != "credential oa unavailable: timeout" || ps[1].Tenant != "t2" {
		t.Fatalf("problems %+v", ps)
	}
	m.CredentialApplied("t1", "oa")
	if ps := m.CredentialProblems(); len(ps) != 1 || ps[0].Credential != "x" {
		t.Fatalf("after t1/oa applied: %+v", ps)
	}
}
