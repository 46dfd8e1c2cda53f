// Package telemetry sets up OpenTelemetry tracing for the broker: OTLP
// export when the standard OTEL_* environment variables ask for it, and a
// no-op provider otherwise.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the default service.name resource attribute.
const ServiceName = "retrybroker"

// Getenv reads an environment variable; tests substitute a map.
type Getenv func(string) string

// ExportEnabled reports whether the OTEL_* variables ask for OTLP export:
// an OTLP endpoint is set, the SDK is not disabled, and the traces exporter
// is not "none".
func ExportEnabled(getenv Getenv) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && !strings.EqualFold(e, "otlp") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and the W3C trace-context and
// baggage propagators. With export enabled it exports OTLP over gRPC, or
// over HTTP when OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL is http/protobuf; the
// exporters read the remaining OTEL_* variables themselves. Otherwise the
// provider is a no-op. The returned shutdown flushes spans.
func Setup(ctx context.Context, getenv Getenv) (trace.TracerProvider, func(context.Context) error, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !ExportEnabled(getenv) {
		tp := noop.NewTracerProvider()
		otel.SetTracerProvider(tp)
		return tp, func(context.Context) error { return nil }, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch proto {
	case "", "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, nil, fmt.Errorf("unsupported OTEL_EXPORTER_OTLP_PROTOCOL %q (want grpc or http/protobuf)", proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("create OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless())
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp, tp.Shutdown, nil
}
