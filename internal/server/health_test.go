package server_test

import (
	"context"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/server"
)

// TestHealthSetReady: SetReady turns the server as a whole and the
// BrokerService NOT_SERVING and back, leaves other services alone, and
// changes nothing after Shutdown.
func TestHealthSetReady(t *testing.T) {
	hs := server.NewHealth()
	hs.SetServingStatus("other", healthpb.HealthCheckResponse_SERVING)
	status := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		r, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return r.GetStatus()
	}
	broker := rbv1.BrokerService_ServiceDesc.ServiceName
	for _, ready := range []bool{false, true, false} {
		hs.SetReady(ready)
		want := healthpb.HealthCheckResponse_NOT_SERVING
		if ready {
			want = healthpb.HealthCheckResponse_SERVING
		}
		if got, gotBroker := status(""), status(broker); got != want || gotBroker != want {
			t.Fatalf("SetReady(%v): %q %v, %q %v; want %v", ready, "", got, broker, gotBroker, want)
		}
		if got := status("other"); got != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("SetReady(%v) changed another service: %v", ready, got)
		}
	}
	hs.Shutdown()
	hs.SetReady(true)
	if got := status(""); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("SetReady after Shutdown: %v", got)
	}
}
