package server

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// DefaultMaxConcurrentStreams bounds the concurrent calls of one connection.
const DefaultMaxConcurrentStreams = 4096

// AuthFunc authenticates a call from its context (incoming metadata and
// peer, TLS state included) and returns a context carrying the tenant, or
// an UNAUTHENTICATED / PERMISSION_DENIED status. It runs when the call's
// headers arrive, before any message is read or decoded, on the
// connection's reader goroutine: it must be fast and must not block.
type AuthFunc func(ctx context.Context) (context.Context, error)

// GRPCConfig configures NewGRPCServer.
type GRPCConfig struct {
	// Logger receives one line per call (never payloads or metadata).
	Logger *slog.Logger
	// TracerProvider for the otelgrpc stats handler (a server span per
	// call); nil means no server spans at all (tracing off costs nothing).
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
	// MaxConnectionAge, when positive, makes the server send GOAWAY to a
	// connection once it is this old (grpc-go adds ±10% jitter), so that
	// callers' long-lived connections spread onto replicas added since;
	// 0 means connections live as long as they are used.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long calls in flight on a connection
	// told to go away may still run before the connection is closed; 0
	// means no limit. It applies only with MaxConnectionAge.
	MaxConnectionAgeGrace time.Duration
	// ExtraOptions are appended to the server options (tests).
	ExtraOptions []grpc.ServerOption
}

// healthPrefix is the method prefix of the health service, which load
// balancers call without keys.
const healthPrefix = "/" + "grpc.health.v1.Health" + "/"

// streamWorkers is the number of gRPC stream workers: 64 per CPU, at
// most maxStreamWorkers. A call that finds every worker busy runs on a new
// goroutine, whose stack starts small (the runtime's average) and grows,
// copied, at each doubling on the way to what a stream needs: at 64
// callers on two cores, with four workers per CPU, that growth was 2-3 µs
// of each stream's handler CPU (runtime.newstack in the suite's profile of
// the stream rows). An idle worker holds a goroutine and a stack the
// collector shrinks, a few KiB.
func streamWorkers() uint32 { return uint32(min(64*runtime.GOMAXPROCS(0), maxStreamWorkers)) }

// maxStreamWorkers bounds the idle workers of a large machine.
const maxStreamWorkers = 4096

// NewGRPCServer builds the broker's gRPC server and registers svc, a Health
// service (SERVING for "" and the broker service) and, optionally,
// reflection.
//
//   - Identity is checked in the transport's tap, when a call's headers
//     arrive and before any of its messages is read: an unauthenticated
//     call costs no decoding and no buffering.
//   - Each request is decoded by the broker itself (see serviceDesc), after
//     its size is checked against what its RPC may carry for its caller
//     (RequestLimiter), so a malformed message answers INVALID_ARGUMENT and
//     an oversized one RESOURCE_EXHAUSTED.
//   - Server-wide limits: MaxRecvMsgSize, MaxSendMsgSize, keepalive
//     enforcement, concurrent streams per connection, and the optional
//     connection age (MaxConnectionAge).
func NewGRPCServer(svc rbv1.BrokerServiceServer, cfg GRPCConfig) (*grpc.Server, *Health) {
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
	access := newAccessLog(logger)
	unary := []grpc.UnaryServerInterceptor{
		access.unary,
		recovery.UnaryServerInterceptor(recoveryOpt),
	}
	stream := []grpc.StreamServerInterceptor{
		access.stream,
		recovery.StreamServerInterceptor(recoveryOpt),
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRawCodec()),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxSendMsgSize(MaxSendMsgSize),
		grpc.MaxConcurrentStreams(streams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepaliveParams(cfg)),
		grpc.ConnectionTimeout(10 * time.Second),
		// Calls run on long-lived workers (new goroutines only when every
		// worker is busy): a worker's stack has already grown to what
		// Execute needs, where a goroutine per call grows its stack anew
		// on every call (runtime.newstack was 7.5% of the CPU of
		// BenchmarkExecuteGRPC/broker); see streamWorkers.
		grpc.NumStreamWorkers(streamWorkers()),
	}
	if cfg.TracerProvider != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(cfg.TracerProvider))))
	}
	if cfg.Auth != nil {
		opts = append(opts, grpc.InTapHandle(tapAuth(cfg.Auth)))
	}
	if cfg.Creds != nil {
		opts = append(opts, grpc.Creds(cfg.Creds))
	}
	opts = append(opts, cfg.ExtraOptions...)
	gs := grpc.NewServer(opts...)
	gs.RegisterService(serviceDesc(svc), svc)
	hs := NewHealth()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetReady(true)
	if cfg.Reflection {
		reflection.Register(gs)
	}
	return gs, hs
}

// keepaliveParams are the server's keepalive parameters: idle connections
// close after 15 minutes, pings after 2 minutes of silence (20 s to answer),
// and the connection age from cfg (zero values are grpc-go's infinity).
func keepaliveParams(cfg GRPCConfig) keepalive.ServerParameters {
	kp := keepalive.ServerParameters{MaxConnectionIdle: 15 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}
	if cfg.MaxConnectionAge > 0 {
		kp.MaxConnectionAge = cfg.MaxConnectionAge
		kp.MaxConnectionAgeGrace = cfg.MaxConnectionAgeGrace
	}
	return kp
}

// tapAuth authenticates every call but health checks when its headers
// arrive. The context it returns, carrying the tenant, becomes the call's.
func tapAuth(auth AuthFunc) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if strings.HasPrefix(info.FullMethodName, healthPrefix) {
			return ctx, nil
		}
		return auth(ctx)
	}
}
