// Command broker runs the retry broker gRPC service.
//
//	broker [--listen 127.0.0.1:50051] [--reflection] [--allow-destinations CIDR,...]
//	broker --config broker.yaml [--redis redis://...] [--tls-cert F --tls-key F [--tls-client-ca F]]
//	broker config check FILE
//	broker version
//	broker providers list|show NAME|test NAME --status N ...|docs [--config FILE [--tenant ID] [--policy NAME]]
//
// With no configuration it runs the embedded default: a single dev tenant,
// the memory store, and a loopback-only listener that needs no key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"google.golang.org/grpc/credentials"

	"github.com/retrybroker/retrybroker/internal/auth"
	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/metrics"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/telemetry"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, nil))
}

// options are the serve flags.
type options struct {
	listen            string
	reflection        bool
	allowDestinations string
	shutdownTimeout   time.Duration
	logLevel          string
	logFormat         string
	// upstreamMaxIdle and upstreamMaxIdlePerHost size the upstream
	// connection pools (0: egress defaults).
	upstreamMaxIdle, upstreamMaxIdlePerHost int
	metricsListen                           string
	maxGatesPerTenant                       int
	adminTokenFile                          string
	adminListen                             string
	maxBufferedBytes                        int64
	redis                                   *redisOptions
	tasksSQLite                             string
	taskFlags                               *taskFlags
	tasksCallbackSecret                     string
	taskStore                               *taskStoreFlags
	configFile                              string
	tlsCert                                 string
	tlsKey                                  string
	tlsClientCA                             string
	requireClientCert                       bool

	// maxConnAge and maxConnAgeGrace are --max-connection-age(-grace).
	maxConnAge, maxConnAgeGrace time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:50051", "gRPC listen address (host:port); non-loopback needs authentication configured")
	fs.BoolVar(&o.reflection, "reflection", false, "register the gRPC server reflection service (for grpcurl)")
	fs.StringVar(&o.allowDestinations, "allow-destinations", "", "comma-separated CIDRs the dev tenant may call even though they are special-purpose (e.g. 127.0.0.1/32)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "longest graceful stop on SIGTERM before in-flight calls are cut")
	fs.DurationVar(&o.maxConnAge, "max-connection-age", 0, "send GOAWAY to a gRPC connection once it is this old (±10% jitter) so callers rebalance onto new replicas; 0 = off")
	fs.DurationVar(&o.maxConnAgeGrace, "max-connection-age-grace", 5*time.Minute, "with --max-connection-age: how long calls in flight on a connection told to go away may still run before it is closed; 0 = no limit")
	fs.StringVar(&o.configFile, "config", "", "YAML file with tenants, API key hashes and policies (see docs/policy.md); reloaded on SIGHUP and on change")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "server certificate (PEM) for TLS")
	fs.StringVar(&o.tlsKey, "tls-key", "", "server private key (PEM) for TLS")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "CA bundle (PEM) for verifying client certificates (mTLS identities)")
	fs.BoolVar(&o.requireClientCert, "tls-require-client-cert", false, "refuse TLS clients without a verified certificate")
	o.redis = addRedisFlags(fs)
	o.taskFlags = addTaskFlags(fs)
	fs.StringVar(&o.tasksSQLite, "tasks-sqlite", "", "keep deferred calls (CreateTask and the other task RPCs, docs/tasks.md) in this SQLite file, created when missing; empty (and no --tasks-postgres) disables the task RPCs (UNIMPLEMENTED)")
	o.taskStore = addTaskStoreFlags(fs)
	fs.StringVar(&o.tasksCallbackSecret, "tasks-callback-secret-file", "", "file of the secret that signs task callbacks (Standard Webhooks: one whsec_... line, several during a rotation; re-read when it changes); without it a task with a callback is refused (FAILED_PRECONDITION)")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9090) and the shared store's state at /health/shared-state; empty disables")
	fs.StringVar(&o.adminListen, "admin-listen", "", "serve the admin view (live gates, catalog, HTML page at /admin/, pprof at /debug/pprof/) at ADDR (e.g. 127.0.0.1:9091): loopback peers only, or with --admin-token-file any address and a bearer token from every peer; empty disables")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file holding the SHA-256 (64 hex digits) of the admin token: the admin listener then needs \"Authorization: Bearer TOKEN\" from every peer, and may listen off loopback")
	fs.IntVar(&o.maxGatesPerTenant, "max-gates-per-tenant", memstore.DefaultMaxGatesPerTenant, "gates (per-host or per-provider state) one tenant may hold in the store; closed gates are never evicted, new ones go untracked when all are closed")
	fs.IntVar(&o.upstreamMaxIdle, "upstream-max-idle-conns", egress.DefaultMaxIdleConns, "idle upstream connections kept per connection pool, across hosts")
	fs.IntVar(&o.upstreamMaxIdlePerHost, "upstream-max-idle-conns-per-host", egress.DefaultMaxIdleConnsPerHost, "idle upstream connections kept per host in each pool; raise it for many concurrent calls to few hosts")
	fs.Int64Var(&o.maxBufferedBytes, "max-buffered-bytes", engine.DefaultBodyBudget, "bytes of request and response bodies all Execute calls may buffer at once (each call reserves its request body plus its max_response_body before it sends); at least 128 MiB")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.maxConnAge < 0 || o.maxConnAgeGrace < 0 {
		return nil, errors.New("--max-connection-age and --max-connection-age-grace must not be negative")
	}
	if err := o.taskFlags.check(); err != nil {
		return nil, err
	}
	if err := o.taskStore.check(o.tasksSQLite); err != nil {
		return nil, err
	}
	if o.maxBufferedBytes < engine.MinBodyBudget {
		return nil, fmt.Errorf("--max-buffered-bytes must be at least %d (the largest request and response bodies of one call), got %d", engine.MinBodyBudget, o.maxBufferedBytes)
	}
	return o, nil
}

func newLogger(o *options, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", o.logFormat)
}

// run serves until ctx ends, then shuts down gracefully. ready, when not
// nil, receives the bound address once the listener is open.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- net.Addr) int {
	if len(args) > 0 && args[0] == "config" {
		return configCommand(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "providers" {
		return providersCommand(args[1:], os.Stdout, stderr)
	}
	if len(args) > 0 && args[0] == "version" {
		return versionCommand(args[1:], os.Stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "broker:", err)
		return 2
	}
	logger, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return 2
	}
	if err := serve(ctx, o, logger, ready); err != nil {
		logger.Error("broker stopped", "error", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, o *options, logger *slog.Logger, ready chan<- net.Addr) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if o.tlsClientCA != "" && o.tlsCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	adminTok, err := loadAdminToken(o.adminTokenFile)
	if err != nil {
		return err
	}
	mets := metrics.New()
	tokens := &tokenClients{}
	ids, err := loadIdentities(o, mets, logger, credentialDeps(tokens, mets, logger))
	if err != nil {
		return err
	}
	if err := checkAdminListen(o.adminListen, adminTok, len(configTokens(ids))); err != nil {
		return err
	}
	var creds credentials.TransportCredentials
	if o.tlsCert != "" {
		if creds, err = auth.ServerTLS(o.tlsCert, o.tlsKey, o.tlsClientCA, o.requireClientCert); err != nil {
			return err
		}
	}
	tp, shutdownTracing, err := telemetry.Setup(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(sctx)
	}()

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	defer lis.Close()
	selfGuard, err := selfGuardOptions(lis.Addr())
	if err != nil {
		return err
	}
	bound := gateBound{maxGates: o.maxGatesPerTenant}
	if err := bound.check(); err != nil {
		return err
	}
	bound.untracked = newUntrackedGates(mets.Registerer(), logger).note
	st, storeMode, err := openStore(ctx, o.redis, logger, bound)
	if err != nil {
		return err
	}
	defer st.Close()
	clients := egress.NewClients(egress.ClientConfig{
		MaxIdleConns: o.upstreamMaxIdle, MaxIdleConnsPerHost: o.upstreamMaxIdlePerHost,
	}, selfGuard...)
	defer clients.CloseIdleConnections()
	tokens.clients.Store(clients)
	runner := engine.NewRunner(st,
		engine.WithTracer(tp.Tracer("github.com/retrybroker/retrybroker")),
		engine.WithPropagator(otel.GetTextMapPropagator()),
		engine.WithObserver(mets),
		engine.WithBodyBudget(o.maxBufferedBytes),
	)
	taskSvc := &server.Tasks{Tenant: taskTenants(ids)}
	svcOpts := []server.Option{
		server.WithExecutor(&server.Executor{Runner: runner, Clients: clients, Logger: logger}),
		server.WithPolicyResolver(auth.ResolvePolicy),
		server.WithTasks(taskSvc),
	}
	grpcCfg := server.GRPCConfig{
		Logger: logger, Reflection: o.reflection, Creds: creds,
		MaxConnectionAge: o.maxConnAge, MaxConnectionAgeGrace: o.maxConnAgeGrace,
	}
	if telemetry.ExportEnabled(os.Getenv) {
		grpcCfg.TracerProvider = tp // server spans only when they go somewhere
	}
	if ids.holder != nil {
		grpcCfg.Auth = auth.New(ids.holder.Directory)
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go ids.holder.Watch(wctx)
	} else {
		svcOpts = append(svcOpts, server.WithDefaultTenant(ids.dev))
	}
	svc := server.New(svcOpts...)
	taskOpts, err := taskOptions(o, taskSvc, tp.Tracer("github.com/retrybroker/retrybroker"), mets, logger)
	if err != nil {
		return err
	}
	stopTasks, err := openTasks(ctx, o.tasksSQLite, o.taskFlags, o.taskStore, runner, svc, taskSvc, logger, taskOpts...)
	if err != nil {
		return err
	}
	defer stopTasks(time.Second) // after an early error; shutdown stops it first otherwise
	gs, hs := server.NewGRPCServer(svc, grpcCfg)
	watchStoreHealth(st, hs, mets, logger)
	if o.metricsListen != "" {
		stopMetrics, err := serveHTTP("metrics", o.metricsListen, func(addr net.Addr) http.Handler {
			warnOpenMetrics(logger, addr)
			return withCredentialsHealth(metricsMux(mets.Handler(), st, storeMode), mets)
		}, logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	if o.adminListen != "" {
		stopAdmin, err := serveAdmin(o.adminListen, st, ids, adminTok, taskSvc.Store, logger)
		if err != nil {
			return err
		}
		defer stopAdmin()
	}
	logger.Info("broker listening", "addr", lis.Addr().String(), "mode", ids.mode, "store", storeMode,
		"tls", creds != nil, "reflection", o.reflection, "allow_destinations", ids.allow)
	if ready != nil {
		ready <- lis.Addr()
	}
	return serveUntilDone(ctx, gs, lis, func() {
		shutdown(logger, gs, hs, runner, o.shutdownTimeout)
		stopTasks(o.shutdownTimeout)
	})
}

// identities is who may call the broker: the configuration's tenants (a
// holder that reloads them) or the embedded dev tenant.
type identities struct {
	holder *config.Holder
	dev    *tenant.Tenant
	mode   string   // for the start-up log line
	allow  []string // --allow-destinations of the dev tenant
}

// loadIdentities loads --config, or builds the dev tenant (loopback only).
func loadIdentities(o *options, mets *metrics.Metrics, logger *slog.Logger, load ...config.LoadOption) (identities, error) {
	allow, err := splitCIDRs(o.allowDestinations)
	if err != nil {
		return identities{}, err
	}
	ids := identities{allow: allow}
	if o.configFile == "" {
		if err := requireLoopback(o.listen); err != nil {
			return ids, err
		}
		if ids.dev, err = tenant.Dev(allow); err != nil {
			return ids, fmt.Errorf("dev tenant: %w", err)
		}
		ids.mode = "dev (single default tenant, no key, loopback only)"
		return ids, nil
	}
	if len(allow) > 0 {
		return ids, errors.New("--allow-destinations applies to the dev tenant only; with --config use each policy's allow_destinations")
	}
	// A reload replaces every policy (and their clients): return the
	// parse garbage to the OS then, as at start.
	ids.holder, err = config.NewHolder(o.configFile, mets.Registerer(), config.WithLogger(logger),
		config.WithOnReload(func(*config.Directory) { debug.FreeOSMemory() }), config.WithLoadOptions(load...))
	if err != nil {
		return ids, err
	}
	// Parsing a large file leaves far more garbage than the live
	// configuration (about 300 MiB for 100,000 tenants against 17 MiB
	// kept): return it to the OS now rather than at the next forced GC.
	debug.FreeOSMemory()
	ids.mode = fmt.Sprintf("configured (%d tenants from %s)", ids.holder.Directory().Len(), o.configFile)
	return ids, nil
}

// serveUntilDone serves on lis until ctx ends (then runs stop, which stops
// the server) or serving fails.
func serveUntilDone(ctx context.Context, gs interface{ Serve(net.Listener) error }, lis net.Listener, stop func()) error {
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop()
	<-errc
	return nil
}

// drainGrace is how long, after the drain deadline, answers to the calls the
// drain ended get to leave before connections are cut.
const drainGrace = time.Second

// shutdown stops serving: health reports NOT_SERVING and ends its Watch
// streams (so they hold nothing), calls parked in waits end at once with
// their attempts, OUTCOME_SHUTTING_DOWN and a retry_after, and calls still
// sending when the timeout passes end the same way;
// then the server stops gracefully, and is cut after a short grace.
func shutdown(logger *slog.Logger, gs interface {
	GracefulStop()
	Stop()
}, hs *server.Health, runner *engine.Runner, timeout time.Duration,
) {
	logger.Info("shutting down: health NOT_SERVING, then graceful stop", "timeout", timeout)
	hs.Shutdown()
	runner.Drain(time.Now().Add(timeout))
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	t := time.NewTimer(timeout + drainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		logger.Warn("graceful stop timed out; cutting remaining calls")
		gs.Stop()
		<-done
	}
}

// configCommand runs `broker config check FILE`.
func configCommand(args []string, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: broker config check FILE")
		return 2
	}
	if err := config.Check(args[1], os.Stdout); err != nil {
		if !errors.Is(err, config.ErrInvalid) {
			fmt.Fprintln(stderr, "broker:", err)
		}
		return 1
	}
	return 0
}

// StoreHealthService is the health service name that reports whether the
// shared store is reachable: NOT_SERVING while the broker runs degraded on
// local state.
const StoreHealthService = "retrybroker.v1.SharedState"

// openStore returns the memory store, or with a Redis topology a Redis
// store that falls back to local state during outages (see redis.go). A
// Redis that is down at start does not stop the broker.
func openStore(ctx context.Context, o *redisOptions, logger *slog.Logger, bound gateBound) (store.Store, string, error) {
	s, err := openRedisStore(ctx, o, logger, bound)
	return s.store, s.describe, err
}

// watchStoreHealth mirrors the Fallback's state into the health service
// (readiness included: NOT_SERVING until the shared store is verified at
// start) and the degraded gauge.
func watchStoreHealth(st store.Store, hs *server.Health, mets *metrics.Metrics, logger *slog.Logger) {
	startSharedState(st, hs, mets, logger)
}

// redisLogger routes go-redis's internal log lines to slog at debug level
// (outages are reported once, as state changes, at warn level).
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis")
}

// selfGuardOptions makes every destination guard refuse the broker's own
// listening address (any local address when it listens on all of them).
func selfGuardOptions(addr net.Addr) ([]egress.GuardOption, error) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return nil, fmt.Errorf("listener address %s: %w", addr, err)
	}
	opts := []egress.GuardOption{egress.SelfAddrs(ap)}
	if ap.Addr().IsUnspecified() {
		local, err := egress.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("list local addresses: %w", err)
		}
		opts = append(opts, egress.SelfPortAnyAddr(), egress.LocalAddrs(local...))
	}
	return opts, nil
}

// serveHTTP serves one HTTP listener (what names it: "metrics", "admin")
// with the handler that handler returns for the address it listens on.
func serveHTTP(what, addr string, handler func(net.Addr) http.Handler, logger *slog.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen on %s: %w", what, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", handler(lis.Addr()))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	logger.Info(what+" listening", "addr", lis.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// splitCIDRs parses a comma-separated list of CIDRs (or bare IPs).
func splitCIDRs(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("--allow-destinations: %q is not a CIDR or IP", part)
			}
			part = netip.PrefixFrom(a, a.BitLen()).String()
		}
		if _, err := netip.ParsePrefix(part); err != nil {
			return nil, fmt.Errorf("--allow-destinations: %q is not a CIDR: %w", part, err)
		}
		out = append(out, part)
	}
	return out, nil
}

// requireLoopback refuses to serve the unauthenticated dev tenant on any
// address but loopback.
func requireLoopback(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %q without authentication: the embedded default has no API keys, so it serves loopback only; pass --config with tenants and key hashes (see docs/operations.md) or listen on 127.0.0.1", listen)
	}
	return nil
}
