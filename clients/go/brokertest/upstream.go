package brokertest

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// Reply is one canned upstream answer: an HTTP response, or a transport
// failure when Transport is set.
type Reply struct {
	// Status is the HTTP status code (default 200).
	Status int
	// Headers are header lines, "Name: value", in order; duplicates are
	// kept.
	Headers []string
	// Body is the response body.
	Body string
	// Transport, when set, makes the attempt fail without a response, with
	// an error the broker classifies as this kind (for example
	// broker.KindConnectionReset). broker.KindDestinationRefused makes
	// Execute fail with PERMISSION_DENIED, as a refused destination does.
	Transport broker.TransportErrorKind
	// Latency advances the fake clock before the reply is returned; it
	// counts towards Attempt.Duration.
	Latency time.Duration
}

// Status returns a Reply with the status and header lines ("Name: value").
func Status(code int, headers ...string) Reply {
	return Reply{Status: code, Headers: headers}
}

// Fail returns a Reply that fails with a transport error of the kind.
func Fail(kind broker.TransportErrorKind) Reply { return Reply{Transport: kind} }

// Request is an upstream request recorded by the canned upstream.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// Time is the fake clock when the request arrived.
	Time time.Time
}

// Upstream is the canned upstream: an in-memory http.RoundTripper that
// answers scripted replies and records every request. The broker's
// Executor sends through it, so requests never leave the process. It is
// safe for concurrent use.
type Upstream struct {
	clock *engine.FakeClock

	mu       sync.Mutex
	scripts  []*script
	requests []Request
}

type script struct {
	prefix  string
	replies []Reply
	next    int
}

// Script makes requests whose URL starts with urlPrefix answer replies in
// order; the last reply repeats. A prefix without "://" matches host and
// path ("api.github.com/repos"); one with it matches the whole URL. The
// longest matching prefix wins. Scripting a prefix again replaces its
// script and starts it over.
func (u *Upstream) Script(urlPrefix string, replies ...Reply) error {
	if len(replies) == 0 {
		return errors.New("brokertest: Script needs at least one reply")
	}
	for i, r := range replies {
		if _, err := parseHeaders(r.Headers); err != nil {
			return fmt.Errorf("brokertest: reply %d for %q: %w", i, urlPrefix, err)
		}
		if r.Transport != broker.KindNone && transportErr(r.Transport, "x") == nil {
			return fmt.Errorf("brokertest: reply %d for %q: unknown transport error kind %q", i, urlPrefix, r.Transport)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s := &script{prefix: urlPrefix, replies: append([]Reply(nil), replies...)}
	for i, old := range u.scripts {
		if old.prefix == urlPrefix {
			u.scripts[i] = s
			return nil
		}
	}
	u.scripts = append(u.scripts, s)
	return nil
}

// Requests returns the requests received so far, in order of arrival.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Request, len(u.requests))
	for i, r := range u.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// RoundTrip records req and answers the next reply of the matching
// script. An unscripted URL fails with a transport error (kind "other")
// whose message names it.
func (u *Upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.requests = append(u.requests, Request{
		Method: req.Method, URL: req.URL.String(), Header: req.Header.Clone(), Body: body, Time: u.clock.Now(),
	})
	reply, ok := u.nextLocked(req.URL)
	u.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("brokertest: no reply scripted for %s %s", req.Method, egress.RedactURL(req.URL))
	}
	if reply.Latency > 0 {
		u.clock.Advance(reply.Latency)
	}
	if reply.Transport != broker.KindNone {
		return nil, transportErr(reply.Transport, req.URL.Hostname())
	}
	hs, _ := parseHeaders(reply.Headers) // checked by Script
	code := reply.Status
	if code == 0 {
		code = http.StatusOK
	}
	h := make(http.Header, len(hs))
	for _, kv := range hs {
		h.Add(kv[0], kv[1])
	}
	status := strconv.Itoa(code)
	if text := http.StatusText(code); text != "" {
		status += " " + text
	}
	return &http.Response{
		Status: status, StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(reply.Body)), ContentLength: int64(len(reply.Body)),
		Request: req,
	}, nil
}

func (u *Upstream) nextLocked(target *url.URL) (Reply, bool) {
	full := target.String()
	hostPath := target.Host + target.EscapedPath()
	var best *script
	for _, s := range u.scripts {
		subject := hostPath
		if strings.Contains(s.prefix, "://") {
			subject = full
		}
		if strings.HasPrefix(subject, s.prefix) && (best == nil || len(s.prefix) > len(best.prefix)) {
			best = s
		}
	}
	if best == nil {
		return Reply{}, false
	}
	r := best.replies[min(best.next, len(best.replies)-1)]
	best.next++
	return r, true
}

// parseHeaders splits "Name: value" lines.
func parseHeaders(lines []string) ([][2]string, error) {
	out := make([][2]string, 0, len(lines))
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("header %q is not \"Name: value\"", l)
		}
		out = append(out, [2]string{name, strings.TrimSpace(value)})
	}
	return out, nil
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "brokertest: i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// transportErr returns an error that the broker classifies as kind, or nil
// for an unknown kind.
func transportErr(kind broker.TransportErrorKind, host string) error {
	switch kind {
	case broker.KindConnectionRefused:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case broker.KindConnectionReset:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case broker.KindEOF:
		return io.ErrUnexpectedEOF
	case broker.KindTimeout:
		return &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}
	case broker.KindDNSTemporary:
		return &net.DNSError{Err: "temporary failure in name resolution", Name: host, IsTemporary: true}
	case broker.KindDNSNotFound:
		return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	case broker.KindTLSCertificate:
		return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	case broker.KindCanceled:
		return context.Canceled
	case broker.KindInvalidURL:
		return url.InvalidHostError("brokertest")
	case broker.KindDestinationRefused:
		return &egress.RefusedError{Host: host, Reason: "refused by a brokertest script"}
	case broker.KindOther:
		return errors.New("brokertest: scripted transport failure")
	}
	return nil
}
