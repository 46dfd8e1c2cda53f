package telemetry

import "testing"

func TestExportEnabled(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "none"}, false},
		{"exporter otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExportEnabled(func(k string) string { return tt.env[k] })
			if got != tt.want {
				t.Fatalf("ExportEnabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSetupNoopWithoutEnv(t *testing.T) {
	tp, shutdown, err := Setup(t.Context(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("x").Start(t.Context(), "s")
	if span.IsRecording() {
		t.Fatal("no-op provider must not record")
	}
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRejectsUnknownProtocol(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}
	if _, _, err := Setup(t.Context(), func(k string) string { return env[k] }); err == nil {
		t.Fatal("want an error for an unknown protocol")
	}
}
