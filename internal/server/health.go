package server

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// Health is the broker's grpc.health.v1 service. It differs from grpc's own
// health.Server in one way that matters at shutdown: Shutdown reports every
// service NOT_SERVING to each watcher and then ends the Watch streams, so
// that open watches never hold a graceful stop.
type Health struct {
	healthpb.UnimplementedHealthServer

	mu       sync.Mutex
	statuses map[string]healthpb.HealthCheckResponse_ServingStatus
	changed  chan struct{} // closed and replaced on every change
	down     bool
}

// NewHealth returns a health service that knows no service yet.
func NewHealth() *Health {
	return &Health{statuses: make(map[string]healthpb.HealthCheckResponse_ServingStatus), changed: make(chan struct{})}
}

// SetServingStatus sets service's status ("" is the server as a whole).
// After Shutdown it does nothing.
func (h *Health) SetServingStatus(service string, st healthpb.HealthCheckResponse_ServingStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return
	}
	if cur, ok := h.statuses[service]; ok && cur == st {
		return
	}
	h.statuses[service] = st
	h.notifyLocked()
}

// SetReady sets the server as a whole ("") and the BrokerService SERVING
// when ready, NOT_SERVING when not (a broker that is starting: readiness
// probes keep traffic away). NewGRPCServer starts ready. After Shutdown it
// does nothing.
func (h *Health) SetReady(ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.SetServingStatus("", st)
	h.SetServingStatus(rbv1.BrokerService_ServiceDesc.ServiceName, st)
}

// Shutdown sets every service NOT_SERVING, ignores later changes, and ends
// every Watch stream once it has sent that status (with UNAVAILABLE).
func (h *Health) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return
	}
	h.down = true
	for k := range h.statuses {
		h.statuses[k] = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.notifyLocked()
}

func (h *Health) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// status returns the service's status (SERVICE_UNKNOWN when unknown), the
// channel closed at its next change, and whether the service is shut down.
func (h *Health) status(service string) (healthpb.HealthCheckResponse_ServingStatus, bool, <-chan struct{}, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.statuses[service]
	if !ok {
		st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	}
	return st, ok, h.changed, h.down
}

// Check implements healthpb.HealthServer.
func (h *Health) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, ok, _, _ := h.status(req.GetService())
	if !ok {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List implements healthpb.HealthServer.
func (h *Health) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &healthpb.HealthListResponse{Statuses: make(map[string]*healthpb.HealthCheckResponse, len(h.statuses))}
	for k, st := range h.statuses {
		out.Statuses[k] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch implements healthpb.HealthServer: the current status at once, then
// every change, until the caller leaves or the service shuts down.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		st, _, changed, down := h.status(req.GetService())
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if down {
			return status.Error(codes.Unavailable, "the broker is shutting down")
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}
