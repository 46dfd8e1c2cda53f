package engine

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes: OpenTelemetry HTTP client semantic conventions, plus the
// decision under the project namespace "retrybroker.".
const (
	attrMethod      = attribute.Key("http.request.method")
	attrURL         = attribute.Key("url.full")
	attrServerAddr  = attribute.Key("server.address")
	attrServerPort  = attribute.Key("server.port")
	attrStatus      = attribute.Key("http.response.status_code")
	attrErrorType   = attribute.Key("error.type")
	attrResendCount = attribute.Key("http.request.resend_count")

	// AttrAttempt is the 1-based attempt number.
	AttrAttempt = attribute.Key("retrybroker.attempt")
	// AttrAction, AttrReason, AttrDelayMS, AttrHintSource and AttrHintMS
	// record the decision taken after an attempt.
	AttrAction     = attribute.Key("retrybroker.decision.action")
	AttrReason     = attribute.Key("retrybroker.decision.reason")
	AttrDelayMS    = attribute.Key("retrybroker.decision.delay_ms")
	AttrHintSource = attribute.Key("retrybroker.decision.hint_source")
	AttrHintMS     = attribute.Key("retrybroker.decision.hint_ms")
	// AttrProvider is the hint reader used.
	AttrProvider = attribute.Key("retrybroker.provider")
	// AttrProbe is true on an attempt that went out as the single unproven
	// call of a learning gate or a half-open breaker.
	AttrProbe = attribute.Key("retrybroker.probe")
	// AttrRule names the provider catalog rule that decided.
	AttrRule = attribute.Key("retrybroker.decision.rule")

	attrWaitCause = attribute.Key("retrybroker.wait.cause")
	attrWaitMS    = attribute.Key("retrybroker.wait.duration_ms")
)

// clientSpan is the span kind option of attempt spans, made once.
var clientSpan = trace.WithSpanKind(trace.SpanKindClient)

// startAttemptSpan starts attempt n's client span. Its attributes are built
// only when the span records (with tracing off, an attempt span costs no
// allocation here).
func (r *Runner) startAttemptSpan(ctx context.Context, c *Call, n int, probe bool) (context.Context, trace.Span) {
	ctx, span := r.tracer.Start(ctx, c.Method, clientSpan)
	if !span.IsRecording() {
		return ctx, span
	}
	host, port := c.URL.Hostname(), c.URL.Port()
	if port == "" {
		port = "80"
		if c.URL.Scheme == "https" {
			port = "443"
		}
	}
	redacted := c.RedactedURL
	if redacted == "" && c.Redact != nil {
		redacted = c.Redact(c.URL)
	}
	attrs := []attribute.KeyValue{
		attrMethod.String(c.Method),
		attrURL.String(redacted),
		attrServerAddr.String(host),
		AttrAttempt.Int(n),
		AttrProvider.String(c.Provider),
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attrServerPort.Int(p))
	}
	if n >= 2 {
		attrs = append(attrs, attrResendCount.Int(n-1))
	}
	if probe {
		attrs = append(attrs, AttrProbe.Bool(true))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

func setSpanStatus(span trace.Span, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatus.Int(status))
	if status >= 400 {
		span.SetAttributes(attrErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
}

func endSpanError(span trace.Span, kind TransportError) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrErrorType.String(kind.String()))
	span.SetStatus(codes.Error, kind.String())
}

// RecordDecision puts a decision on span under the project namespace.
func RecordDecision(span trace.Span, d Decision) {
	if span.IsRecording() {
		recordDecision(span, &d)
	}
}

// recordDecision is RecordDecision on a span that records. It is not
// inlined: its attributes would take room in the frames of the attempt's
// path (see callState.run on the stack), where a span that records nothing
// needs none.
//
//go:noinline
func recordDecision(span trace.Span, d *Decision) {
	span.SetAttributes(AttrAction.String(d.Action.String()), AttrReason.String(d.Reason.String()))
	if d.Action == ActionRetry {
		span.SetAttributes(AttrDelayMS.Int64(d.Delay.Milliseconds()), AttrHintSource.String(d.HintSource))
	}
	if d.HasHint {
		span.SetAttributes(AttrHintMS.Int64(d.Hint.Milliseconds()))
	}
	if d.Rule != "" {
		span.SetAttributes(AttrRule.String(d.Rule))
	}
}
