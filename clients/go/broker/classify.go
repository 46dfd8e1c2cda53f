package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// MaxClassifyBody is the most body bytes the broker accepts for body-aware
// readers, and the most Classify peeks at (64 KiB).
const MaxClassifyBody = 64 << 10

// Classify asks the broker whether the request that got resp should be
// sent again, and after how long. The same rules as Execute apply, so
// services that make their own HTTP calls share one set of rules.
//
// What is sent: resp's status and headers (names sorted; each name's
// values in order, duplicates kept), and:
//   - the method: Method, else resp.Request.Method, else GET;
//   - the URL: URL, else resp.Request.URL, as scheme://host/path only (no
//     userinfo, no query). With a URL the broker chooses the provider by
//     host and shares the tenant's cooldown gate for that destination with
//     Execute;
//   - the body: Body, else, for a status of 400 or more, Classify peeks at
//     up to 64 KiB of resp.Body for body-aware readers and puts them back:
//     resp.Body still reads the whole body afterwards;
//   - RequestHeader, AttemptNumber (default 1), Now, Deadline, Policy, Provider
//     only when given (Policy defaults to WithDefaultPolicy).
//
// A failed RPC returns an *Error.
func (c *Client) Classify(ctx context.Context, resp *http.Response, opts ...ClassifyOption) (Decision, error) {
	if resp == nil {
		return Decision{}, errorf("Classify: nil response (use ClassifyError for a failed call)")
	}
	cfg := classifyConfig{attempt: 1}
	for _, o := range opts {
		o.applyClassify(&cfg)
	}
	req := c.classifyRequest(&cfg, resp.Request)
	req.StatusCode = int32(resp.StatusCode)
	req.Headers = headerLines(resp.Header, nil)
	switch {
	case cfg.hasBody:
		req.Body = cfg.body
	case resp.StatusCode >= 400 && resp.Body != nil && resp.Body != http.NoBody:
		req.Body = peekBody(resp)
	}
	return c.classify(ctx, req)
}

// ClassifyError asks the broker whether a request that failed with err,
// without a response, should be sent again. The kind of failure is
// KindOf(err); pass a *TransportError to state it explicitly. The method,
// URL and other details come from the options only. A nil err is refused.
func (c *Client) ClassifyError(ctx context.Context, err error, opts ...ClassifyOption) (Decision, error) {
	if err == nil {
		return Decision{}, errorf("ClassifyError: nil error (use Classify for a response)")
	}
	cfg := classifyConfig{attempt: 1}
	for _, o := range opts {
		o.applyClassify(&cfg)
	}
	req := c.classifyRequest(&cfg, nil)
	kind := KindOf(err)
	te, ok := kind.toProto()
	if !ok {
		return Decision{}, errorf("ClassifyError: unknown transport error kind %q", kind)
	}
	req.TransportError = te
	return c.classify(ctx, req)
}

func (c *Client) classifyRequest(cfg *classifyConfig, r *http.Request) *rbv1.ClassifyResponseRequest {
	req := &rbv1.ClassifyResponseRequest{
		Policy:   c.policyName(cfg.policy, cfg.hasPolicy),
		Provider: cfg.provider,
		Attempt:  uint32(max(cfg.attempt, 0)),
	}
	switch {
	case cfg.hasMethod:
		req.Method = cfg.method
	case r != nil:
		req.Method = r.Method
	}
	switch {
	case cfg.hasURL:
		req.Url = cfg.rawURL
		if u, err := url.Parse(cfg.rawURL); err == nil && u.Host != "" {
			req.Url = stripURL(u)
		}
	case r != nil && r.URL != nil && r.URL.Host != "":
		req.Url = stripURL(r.URL)
	}
	if cfg.reqHeader != nil {
		req.RequestHeaders = headerLines(cfg.reqHeader, nil)
	}
	if !cfg.now.IsZero() {
		req.Now = timestamppb.New(cfg.now)
	}
	if cfg.hasDeadline {
		req.Deadline = timestamppb.New(cfg.deadline)
	}
	return req
}

func (c *Client) classify(ctx context.Context, req *rbv1.ClassifyResponseRequest) (Decision, error) {
	out, err := c.rpc.ClassifyResponse(ctx, req, c.callOpts...)
	if err != nil {
		return Decision{}, fromRPC(err)
	}
	return decisionFromProto(out.GetDecision()), nil
}

// stripURL keeps scheme, host and path: what the broker needs to choose a
// provider and a gate, and nothing secret.
func stripURL(u *url.URL) string {
	s := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return s.String()
}

// peekBody reads up to MaxClassifyBody bytes of resp.Body and replaces
// resp.Body with a reader that returns them again, then the rest.
func peekBody(resp *http.Response) []byte {
	orig := resp.Body
	peek, err := io.ReadAll(io.LimitReader(orig, MaxClassifyBody))
	rest := io.Reader(orig)
	if err != nil {
		rest = &errReader{err: err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(peek), rest), Closer: orig}
	return peek
}

type peekedBody struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// KindOf maps an error of an HTTP round trip (net/http, or any client
// that wraps the standard errors) to a transport error kind. The first
// matching rule wins:
//
//   - nil: KindNone;
//   - a *TransportError: its Kind;
//   - context.Canceled: KindCanceled;
//   - context.DeadlineExceeded: KindTimeout;
//   - *net.DNSError: KindDNSNotFound when IsNotFound, else KindDNSTemporary;
//   - a rejected server certificate (*tls.CertificateVerificationError and
//     the crypto/x509 verification errors): KindTLSCertificate;
//   - a URL parse error, an unsupported scheme or a missing host:
//     KindInvalidURL;
//   - ECONNREFUSED: KindConnectionRefused;
//   - ECONNRESET, ECONNABORTED or EPIPE: KindConnectionReset;
//   - io.EOF or io.ErrUnexpectedEOF: KindEOF;
//   - a net.Error whose Timeout() is true (http.Client.Timeout, dial and
//     response-header timeouts): KindTimeout;
//   - anything else: KindOther (not retryable).
//
// These are the broker's own rules for the errors it meets in Execute.
func KindOf(err error) TransportErrorKind {
	if err == nil {
		return KindNone
	}
	var (
		te     *TransportError
		dnsErr *net.DNSError
		netErr net.Error
	)
	switch {
	case errors.As(err, &te):
		return te.Kind
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return KindDNSNotFound
		}
		return KindDNSTemporary
	case isCertificateError(err):
		return KindTLSCertificate
	case isInvalidURL(err):
		return KindInvalidURL
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return KindConnectionReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return KindEOF
	case errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	}
	return KindOther
}

func isCertificateError(err error) bool {
	var (
		verification     *tls.CertificateVerificationError
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		systemRoots      x509.SystemRootsError
		constraint       x509.ConstraintViolationError
		critical         x509.UnhandledCriticalExtension
		insecure         x509.InsecureAlgorithmError
	)
	return errors.As(err, &verification) || errors.As(err, &unknownAuthority) ||
		errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &systemRoots) || errors.As(err, &constraint) ||
		errors.As(err, &critical) || errors.As(err, &insecure)
}

func isInvalidURL(err error) bool {
	var (
		hostErr   url.InvalidHostError
		escapeErr url.EscapeError
		urlErr    *url.Error
	)
	if errors.As(err, &hostErr) || errors.As(err, &escapeErr) {
		return true
	}
	if errors.As(err, &urlErr) {
		if urlErr.Op == "parse" {
			return true
		}
		// net/http reports these with unexported error values.
		msg := urlErr.Err.Error()
		return strings.HasPrefix(msg, "unsupported protocol scheme") ||
			strings.HasPrefix(msg, "http: no Host in request URL") ||
			strings.HasPrefix(msg, "net/http: nil Request.URL")
	}
	return false
}
