package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestKindOf(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: "https://api.example.com/", Err: err} }
	tests := []struct {
		err  error
		want broker.TransportErrorKind
	}{
		{nil, broker.KindNone},
		{&broker.TransportError{Kind: broker.KindEOF}, broker.KindEOF},
		{wrap(context.Canceled), broker.KindCanceled},
		{wrap(context.DeadlineExceeded), broker.KindTimeout},
		{wrap(&net.DNSError{Err: "no such host", IsNotFound: true}), broker.KindDNSNotFound},
		{wrap(&net.DNSError{Err: "server misbehaving", IsTemporary: true}), broker.KindDNSTemporary},
		{wrap(&tls.CertificateVerificationError{Err: x509.HostnameError{}}), broker.KindTLSCertificate},
		{wrap(x509.UnknownAuthorityError{}), broker.KindTLSCertificate},
		{wrap(url.InvalidHostError("x y")), broker.KindInvalidURL},
		{wrap(errors.New("unsupported protocol scheme \"ftp\"")), broker.KindInvalidURL},
		{wrap(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), broker.KindConnectionRefused},
		{wrap(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), broker.KindConnectionReset},
		{wrap(syscall.EPIPE), broker.KindConnectionReset},
		{wrap(io.EOF), broker.KindEOF},
		{wrap(io.ErrUnexpectedEOF), broker.KindEOF},
		{wrap(&net.OpError{Op: "dial", Err: timeoutErr{}}), broker.KindTimeout},
		{wrap(errors.New("something else")), broker.KindOther},
		{fmt.Errorf("while fetching: %w", syscall.ECONNREFUSED), broker.KindConnectionRefused},
	}
	for _, tt := range tests {
		if got := broker.KindOf(tt.err); got != tt.want {
			t.Errorf("KindOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestKindOfRealFailures maps errors that net/http really returns.
func TestKindOfRealFailures(t *testing.T) {
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	_, err = hc.Get("http://" + addr + "/")
	if got := broker.KindOf(err); got != broker.KindConnectionRefused {
		t.Errorf("refused port: KindOf(%v) = %q", err, got)
	}
	_, err = hc.Get("ftp://example.com/")
	if got := broker.KindOf(err); got != broker.KindInvalidURL {
		t.Errorf("ftp: KindOf(%v) = %q", err, got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	_, err = hc.Do(req)
	if got := broker.KindOf(err); got != broker.KindCanceled {
		t.Errorf("canceled: KindOf(%v) = %q", err, got)
	}
}

// TestClassifySendsWhatItKnows checks the ClassifyResponse request built
// from a response, its request and the options.
func TestClassifySendsWhatItKnows(t *testing.T) {
	svc := &fakeService{}
	c, _ := bufClient(t, svc, broker.WithDefaultPolicy("bulk"))
	req, _ := http.NewRequest(http.MethodPut, "https://user:pw@api.example.com/v1/items?token=secret", nil)
	req.Header.Set("Idempotency-Key", "k")
	resp := &http.Response{
		StatusCode: 429, Request: req,
		Header: http.Header{"Retry-After": {"3"}, "X-B": {"1", "2"}},
		Body:   io.NopCloser(strings.NewReader(`{"retry_after": 1.5}`)),
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Minute)
	if _, err := c.Classify(t.Context(), resp, broker.AttemptNumber(2), broker.Now(now), broker.Deadline(deadline), broker.RequestHeader(req.Header), broker.Provider("discord")); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	got := svc.lastReq.(*rbv1.ClassifyResponseRequest)
	svc.mu.Unlock()
	if got.GetMethod() != "PUT" || got.GetUrl() != "https://api.example.com/v1/items" || got.GetPolicy() != "bulk" ||
		got.GetProvider() != "discord" || got.GetAttempt() != 2 || got.GetStatusCode() != 429 ||
		!got.GetNow().AsTime().Equal(now) || !got.GetDeadline().AsTime().Equal(deadline) ||
		string(got.GetBody()) != `{"retry_after": 1.5}` {
		t.Fatalf("request %v", got)
	}
	var lines []string
	for _, h := range got.GetHeaders() {
		lines = append(lines, h.GetName()+"="+h.GetValue())
	}
	if strings.Join(lines, ",") != "Retry-After=3,X-B=1,X-B=2" {
		t.Fatalf("headers %v", lines)
	}
	if len(got.GetRequestHeaders()) != 1 || got.GetRequestHeaders()[0].GetName() != "Idempotency-Key" {
		t.Fatalf("request headers %v", got.GetRequestHeaders())
	}
	// The caller still reads the whole body.
	if b, _ := io.ReadAll(resp.Body); string(b) != `{"retry_after": 1.5}` {
		t.Fatalf("body after Classify %q", b)
	}

	// Explicit options win over the request; a success body is not read.
	ok := &http.Response{StatusCode: 200, Request: req, Body: io.NopCloser(strings.NewReader("payload"))}
	if _, err := c.Classify(t.Context(), ok, broker.Method("GET"), broker.URL("http://other.example.com/p?q=1"), broker.Policy("")); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	got = svc.lastReq.(*rbv1.ClassifyResponseRequest)
	svc.mu.Unlock()
	if got.GetMethod() != "GET" || got.GetUrl() != "http://other.example.com/p" || got.GetPolicy() != "" || len(got.GetBody()) != 0 || got.GetAttempt() != 1 {
		t.Fatalf("request %v", got)
	}

	if _, err := c.Classify(t.Context(), nil); err == nil {
		t.Fatal("nil response accepted")
	}
	if _, err := c.ClassifyError(t.Context(), nil); err == nil {
		t.Fatal("nil error accepted")
	}
}

// TestClassifyBodyAwareReader: Classify peeks at the body, so the discord
// reader finds retry_after in it.
func TestClassifyBodyAwareReader(t *testing.T) {
	b := brokertest.New(t)
	resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"message": "You are being rate limited.", "retry_after": 2.5}`))}
	d, err := b.Client().Classify(t.Context(), resp, broker.Provider("discord"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != broker.ActionRetry || d.Delay != 2500*time.Millisecond || d.HintSource != "body:retry_after" || d.Provider != "discord" {
		t.Fatalf("decision %+v", d)
	}
	// Body overrides the peek.
	d, err = b.Client().Classify(t.Context(), &http.Response{StatusCode: 429}, broker.Provider("discord"), broker.Body([]byte(`{"retry_after": 4}`)))
	if err != nil || d.Delay != 4*time.Second {
		t.Fatalf("decision %+v, err %v", d, err)
	}
}
