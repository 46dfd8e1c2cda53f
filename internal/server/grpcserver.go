package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// Server limits. Execute carries request bodies of up to 8 MiB and returns
// response bodies of up to 32 MiB (policy limits), plus headers.
const (
	DefaultMaxRecvMsgSize       = 10 << 20
	DefaultMaxSendMsgSize       = 40 << 20
	DefaultMaxConcurrentStreams = 4096
)

// AuthFunc authenticates a call and returns a context carrying the tenant,
// or an UNAUTHENTICATED / PERMISSION_DENIED status.
type AuthFunc func(ctx context.Context) (context.Context, error)

// GRPCConfig configures NewGRPCServer.
type GRPCConfig struct {
	// Logger receives one line per call (never payloads or metadata).
	Logger *slog.Logger
	// TracerProvider for the otelgrpc stats handler; nil means the global.
	TracerProvider trace.TracerProvider
	// Auth authenticates every call but health checks; nil means none
	// (the embedded default, loopback only).
	Auth AuthFunc
	// Creds are transport credentials (TLS or mTLS); nil means plaintext.
	Creds credentials.TransportCredentials
	// Reflection registers the server reflection service.
	Reflection bool
	// MaxConcurrentStreams per connection; 0 means the default.
	MaxConcurrentStreams uint32
	// ExtraOptions are appended to the server options (tests).
	ExtraOptions []grpc.ServerOption
}

// NewGRPCServer builds the broker's gRPC server with its interceptors,
// limits, health service and (optionally) reflection, and registers svc.
// The health server reports SERVING for "" and the broker service.
func NewGRPCServer(svc rbv1.BrokerServiceServer, cfg GRPCConfig) (*grpc.Server, *health.Server) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	streams := cfg.MaxConcurrentStreams
	if streams == 0 {
		streams = DefaultMaxConcurrentStreams
	}
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic while handling a call", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	unary := []grpc.UnaryServerInterceptor{
		logging.UnaryServerInterceptor(interceptorLogger(logger), logOpts...),
		recovery.UnaryServerInterceptor(recoveryOpt),
	}
	stream := []grpc.StreamServerInterceptor{
		logging.StreamServerInterceptor(interceptorLogger(logger), logOpts...),
		recovery.StreamServerInterceptor(recoveryOpt),
	}
	if cfg.Auth != nil {
		// Health checks are exempt: load balancers probe without keys.
		notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
			return c.Service != healthpb.Health_ServiceDesc.ServiceName
		})
		unary = append(unary, selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(auth.AuthFunc(cfg.Auth)), notHealth))
		stream = append(stream, selector.StreamServerInterceptor(auth.StreamServerInterceptor(auth.AuthFunc(cfg.Auth)), notHealth))
	}
	statsOpts := []otelgrpc.Option{}
	if cfg.TracerProvider != nil {
		statsOpts = append(statsOpts, otelgrpc.WithTracerProvider(cfg.TracerProvider))
	}
	opts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(statsOpts...)),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(DefaultMaxRecvMsgSize),
		grpc.MaxSendMsgSize(DefaultMaxSendMsgSize),
		grpc.MaxConcurrentStreams(streams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 15 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ConnectionTimeout(10 * time.Second),
	}
	if cfg.Creds != nil {
		opts = append(opts, grpc.Creds(cfg.Creds))
	}
	opts = append(opts, cfg.ExtraOptions...)
	gs := grpc.NewServer(opts...)
	rbv1.RegisterBrokerServiceServer(gs, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rbv1.BrokerService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if cfg.Reflection {
		reflection.Register(gs)
	}
	return gs, hs
}

// interceptorLogger adapts slog to go-grpc-middleware's logging.Logger.
func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
