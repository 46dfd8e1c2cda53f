package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
	"github.com/retrybroker/retrybroker/internal/vectors"
)

// goErrorFor returns an error such as net/http returns for a transport
// failure of the vector's kind, so that the conformance run also checks
// broker.KindOf.
func goErrorFor(t *testing.T, kind string) error {
	t.Helper()
	switch broker.TransportErrorKind(kind) {
	case broker.KindConnectionRefused:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case broker.KindConnectionReset:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case broker.KindEOF:
		return io.ErrUnexpectedEOF
	case broker.KindTimeout:
		return context.DeadlineExceeded
	case broker.KindDNSTemporary:
		return &net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}
	case broker.KindDNSNotFound:
		return &net.DNSError{Err: "no such host", Name: "api.example.com", IsNotFound: true}
	case broker.KindTLSCertificate:
		return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	case broker.KindCanceled:
		return context.Canceled
	case broker.KindInvalidURL:
		return &url.Error{Op: "parse", URL: "::", Err: errors.New("missing protocol scheme")}
	}
	t.Fatalf("no Go error for transport_error %q", kind)
	return nil
}

// classifyVector runs one vector through Classify (or ClassifyError) and
// returns the decision in the vectors' neutral form.
func classifyVector(t *testing.T, c *broker.Client, v *vectors.Vector) vectors.Got {
	t.Helper()
	opts := []broker.ClassifyOption{
		broker.Method(v.Method), broker.AttemptNumber(v.Attempt), broker.Now(v.Now), broker.Provider(v.Provider),
	}
	var d broker.Decision
	var err error
	if v.TransportError != "" {
		goErr := goErrorFor(t, v.TransportError)
		if got := broker.KindOf(goErr); string(got) != v.TransportError {
			t.Fatalf("KindOf(%T) = %q, want %q", goErr, got, v.TransportError)
		}
		d, err = c.ClassifyError(t.Context(), goErr, opts...)
	} else {
		resp := &http.Response{StatusCode: v.Status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(v.Body))}
		for _, kv := range v.Headers {
			resp.Header.Add(kv[0], kv[1])
		}
		d, err = c.Classify(t.Context(), resp, opts...)
		if err == nil {
			// Classify peeks at the body for body-aware readers; the
			// caller must still be able to read all of it.
			b, rerr := io.ReadAll(resp.Body)
			if rerr != nil || string(b) != v.Body {
				t.Fatalf("body after Classify = %q (%v), want %q", b, rerr, v.Body)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if d.Action == broker.ActionUnspecified || d.Reason == "" || d.Reason == broker.ReasonUnspecified {
		t.Fatalf("incomplete decision %+v", d)
	}
	return vectors.Got{
		Action: d.Action.String(), Delay: d.Delay, HintSource: d.HintSource,
		Reason: string(d.Reason), Hint: d.Hint, HasHint: d.HasHint,
	}
}

func runVectors(t *testing.T, c *broker.Client) {
	vs, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	for i := range vs {
		v := &vs[i]
		t.Run(v.Name, func(t *testing.T) {
			if err := v.Check(classifyVector(t, c, v)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestConformanceVectorsBrokertest runs every vector of
// testdata/classify.jsonl through Classify against an in-process broker.
func TestConformanceVectorsBrokertest(t *testing.T) {
	b := brokertest.New(t)
	runVectors(t, b.Client())
}

// TestConformanceVectorsRealBroker runs every vector through Classify
// against the broker command, over TCP.
func TestConformanceVectorsRealBroker(t *testing.T) {
	p := realBroker(t)
	c, err := broker.New(p.target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runVectors(t, c)
}
