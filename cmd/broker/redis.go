package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrybroker/retrybroker/internal/metrics"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
)

// SharedStateHealthPath serves the shared store's state as JSON on the
// metrics listener.
const SharedStateHealthPath = "/health/shared-state"

// DefaultStartWait is how long, at most, a replica waits at start for its
// first verification of the shared store before it serves (on local state,
// degraded, when the verification has not passed by then).
const DefaultStartWait = 5 * time.Second

// maxStartWait bounds --redis-start-wait.
const maxStartWait = 5 * time.Minute

// startVerifyTimeout bounds the verification of the shared store at start
// with --redis-start-wait 0 (which does not wait for it).
const startVerifyTimeout = 2 * time.Second

// Environment variables of the shared-store options. Each flag defaults to
// its variable; the passwords exist only as variables or files, never as
// flags (flags show in the process list).
const (
	envURL                  = "BROKER_REDIS_URL"
	envCluster              = "BROKER_REDIS_CLUSTER"
	envSentinel             = "BROKER_REDIS_SENTINEL"
	envUser                 = "BROKER_REDIS_USER"
	envPassword             = "BROKER_REDIS_PASSWORD"
	envPasswordFile         = "BROKER_REDIS_PASSWORD_FILE"
	envSentinelUser         = "BROKER_REDIS_SENTINEL_USER"
	envSentinelPassword     = "BROKER_REDIS_SENTINEL_PASSWORD"
	envSentinelPasswordFile = "BROKER_REDIS_SENTINEL_PASSWORD_FILE"
	envTLS                  = "BROKER_REDIS_TLS"
	envCA                   = "BROKER_REDIS_CA"
	envCert                 = "BROKER_REDIS_CERT"
	envKey                  = "BROKER_REDIS_KEY"
	envServerName           = "BROKER_REDIS_TLS_SERVER_NAME"
	envLocalAdmission       = "BROKER_REDIS_LOCAL_ADMISSION"
	envHealthInterval       = "BROKER_REDIS_HEALTH_INTERVAL"
	envStartWait            = "BROKER_REDIS_START_WAIT"
)

// redisOptions are the shared-store options, from flags and environment
// variables.
type redisOptions struct {
	url, cluster, sentinel     envValue
	user, passwordFile         envValue
	sentinelUser, sentinelFile envValue
	tls                        envBool
	ca, cert, key, serverName  envValue
	localAdmission             envValue
	healthInterval             envValue
	startWait                  envValue
	// getenv reads the password variables (os.Getenv outside tests).
	getenv func(string) string
}

// envValue is a string flag whose default is an environment variable; it
// records where its value came from, and shows URLs redacted in -help.
type envValue struct {
	value, env string
	flagSet    bool
	redact     bool
}

func (v *envValue) Set(s string) error { v.value, v.flagSet = s, true; return nil }

func (v *envValue) String() string {
	if v == nil {
		return ""
	}
	if v.redact {
		return redactAny(v.value)
	}
	return v.value
}

// envBool is an envValue that may be given as a bare flag (--redis-tls).
type envBool struct{ envValue }

// IsBoolFlag lets the flag package accept the flag without a value.
func (*envBool) IsBoolFlag() bool { return true }

// duration parses v as a non-negative duration for the flag flagName: def
// when v was not given, an error saying want when it is not a duration (or
// negative), and one naming the bound (with why after it) when it is over
// limit (0: no bound).
func (v *envValue) duration(flagName string, def, limit time.Duration, want, why string) (time.Duration, error) {
	s := strings.TrimSpace(v.value)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %s", v.source(flagName), want)
	}
	if limit > 0 && d > limit {
		return 0, fmt.Errorf("%s: %s is longer than %s%s", v.source(flagName), d, limit, why)
	}
	return d, nil
}

// source names where the value came from, for messages.
func (v *envValue) source(flagName string) string {
	if v.flagSet {
		return "--" + flagName
	}
	return "$" + v.env
}

// addRedisFlags registers the shared-store flags on fs. Each defaults to
// its environment variable, read now.
func addRedisFlags(fs *flag.FlagSet) *redisOptions {
	return addRedisFlagsEnv(fs, os.Getenv)
}

func addRedisFlagsEnv(fs *flag.FlagSet, getenv func(string) string) *redisOptions {
	o := &redisOptions{getenv: getenv}
	def := func(v *envValue, env string, redact bool) *envValue {
		v.env, v.value, v.redact = env, getenv(env), redact
		return v
	}
	fs.Var(def(&o.url, envURL, true), "redis", "Redis `URL` of a single server (or a managed endpoint that acts as one) for state shared by replicas: redis://[user@]host:port/db, rediss:// for TLS; default $"+envURL+"; one of --redis, --redis-cluster and --redis-sentinel, none = memory store")
	fs.Var(def(&o.cluster, envCluster, false), "redis-cluster", "Redis Cluster seed nodes `ADDR,ADDR,...` (managed services in cluster mode are Redis Cluster); default $"+envCluster)
	fs.Var(def(&o.sentinel, envSentinel, false), "redis-sentinel", "Redis Sentinel: `MASTER@ADDR,ADDR,...` (the master's name and the sentinels); default $"+envSentinel)
	fs.Var(def(&o.user, envUser, false), "redis-user", "Redis ACL `user`; default $"+envUser+"; the password comes from --redis-password-file or $"+envPassword)
	fs.Var(def(&o.passwordFile, envPasswordFile, false), "redis-password-file", "`file` holding the Redis password (one line); default $"+envPasswordFile)
	fs.Var(def(&o.sentinelUser, envSentinelUser, false), "redis-sentinel-user", "ACL `user` of the sentinels themselves, when they require one; default $"+envSentinelUser)
	fs.Var(def(&o.sentinelFile, envSentinelPasswordFile, false), "redis-sentinel-password-file", "`file` holding the sentinels' own password; default $"+envSentinelPasswordFile+" (or the password in $"+envSentinelPassword+")")
	def(&o.tls.envValue, envTLS, false)
	fs.Var(&o.tls, "redis-tls", "use TLS to Redis (implied by rediss://, --redis-ca, --redis-cert and --redis-tls-server-name): true or false; default $"+envTLS)
	fs.Var(def(&o.ca, envCA, false), "redis-ca", "CA bundle `file` (PEM) that signed the Redis servers' certificates, instead of the system roots; default $"+envCA)
	fs.Var(def(&o.cert, envCert, false), "redis-cert", "client certificate `file` (PEM) for Redis servers that require one; needs --redis-key; default $"+envCert)
	fs.Var(def(&o.key, envKey, false), "redis-key", "client certificate's private key `file` (PEM); default $"+envKey)
	fs.Var(def(&o.serverName, envServerName, false), "redis-tls-server-name", "`name` to verify in the Redis servers' certificates, instead of each address dialled; default $"+envServerName)
	fs.Var(def(&o.localAdmission, envLocalAdmission, false), "redis-local-admission", "how long a replica admits calls on a plain gate (nothing known, nothing learned, breaker closed, no pacing) without a Redis round trip, after Redis said it is plain: a `duration`, 0 = every call a round trip; default $"+envLocalAdmission+" or "+redisstore.DefaultLocalAdmissionTTL.String()+" (docs/operations.md)")
	fs.Var(def(&o.healthInterval, envHealthInterval, false), "redis-health-interval", "how often a replica checks that Redis answers (a PING), calls or none, so that an idle replica reports an outage: a `duration`, 0 = only calls notice; default $"+envHealthInterval+" or "+store.DefaultHealthInterval.String()+" (docs/operations.md)")
	fs.Var(def(&o.startWait, envStartWait, false), "redis-start-wait", "how long a replica waits at start for its first verification of Redis before it is ready (health NOT_SERVING meanwhile, calls wait for it); after that it serves on local state until Redis is verified: a `duration`, 0 = ready at once; default $"+envStartWait+" or "+DefaultStartWait.String()+" (docs/operations.md)")
	return o
}

// sharedStore is what openRedisStore set up: the store, a description for
// the start-up log, and how it is reached.
type sharedStore struct {
	store    store.Store
	describe string
}

// redisConfig turns the options into a redisstore.Config. It returns a
// zero Config (and no error) when no topology is given: the memory store.
// warnings are things to log (never secrets).
func (o *redisOptions) redisConfig() (cfg redisstore.Config, warnings []string, err error) {
	var given []string
	for _, t := range []struct {
		v    *envValue
		flag string
	}{{&o.url, "redis"}, {&o.cluster, "redis-cluster"}, {&o.sentinel, "redis-sentinel"}} {
		if t.v.value != "" {
			given = append(given, t.v.source(t.flag))
		}
	}
	if len(given) > 1 {
		return cfg, nil, fmt.Errorf("give one Redis topology, not %s", strings.Join(given, " and "))
	}
	if len(given) == 0 {
		for _, t := range []struct {
			v    *envValue
			flag string
		}{
			{&o.user, "redis-user"},
			{&o.passwordFile, "redis-password-file"},
			{&o.sentinelUser, "redis-sentinel-user"},
			{&o.sentinelFile, "redis-sentinel-password-file"},
			{&o.tls.envValue, "redis-tls"},
			{&o.ca, "redis-ca"},
			{&o.cert, "redis-cert"},
			{&o.key, "redis-key"},
			{&o.serverName, "redis-tls-server-name"},
		} {
			if t.v.value != "" {
				return cfg, nil, fmt.Errorf("%s needs --redis, --redis-cluster or --redis-sentinel", t.v.source(t.flag))
			}
		}
		if o.getenv(envPassword) != "" {
			return cfg, nil, fmt.Errorf("$%s needs --redis, --redis-cluster or --redis-sentinel", envPassword)
		}
		return cfg, nil, nil
	}

	switch {
	case o.url.value != "":
		cfg.URL = o.url.value
		if hasURLPassword(cfg.URL) && o.url.flagSet {
			warnings = append(warnings, "the Redis password in --redis shows in the process list: use --redis-password-file or $"+envPassword)
		}
	case o.cluster.value != "":
		if cfg.ClusterAddrs, err = redisstore.ParseAddrs(o.cluster.value); err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", o.cluster.source("redis-cluster"), err)
		}
	default:
		if cfg.SentinelMaster, cfg.SentinelAddrs, err = redisstore.ParseSentinel(o.sentinel.value); err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", o.sentinel.source("redis-sentinel"), err)
		}
	}
	if o.sentinelUser.value != "" || o.sentinelFile.value != "" || o.getenv(envSentinelPassword) != "" {
		if cfg.SentinelMaster == "" {
			return cfg, nil, errors.New("the sentinels' own credentials need --redis-sentinel")
		}
	}
	cfg.Username = o.user.value
	if cfg.Password, err = o.secret(&o.passwordFile, "redis-password-file", envPassword); err != nil {
		return cfg, nil, err
	}
	if cfg.URL != "" && (cfg.Username != "" || cfg.Password != "") && hasURLCredentials(cfg.URL) {
		return cfg, nil, fmt.Errorf("credentials both in %s and in --redis-user or the password: give them once", o.url.source("redis"))
	}
	cfg.SentinelUsername = o.sentinelUser.value
	if cfg.SentinelPassword, err = o.secret(&o.sentinelFile, "redis-sentinel-password-file", envSentinelPassword); err != nil {
		return cfg, nil, err
	}
	if cfg.TLS, err = o.tlsConfig(strings.HasPrefix(cfg.URL, "rediss://")); err != nil {
		return cfg, nil, err
	}
	if strings.HasPrefix(cfg.URL, "unix://") && cfg.TLS != nil {
		return cfg, nil, errors.New("TLS options do not apply to a unix:// Redis URL")
	}
	return cfg, warnings, nil
}

// secret reads a password from file (the flag or its variable) or from the
// variable env; giving both is an error. A trailing newline in the file is
// not part of the password.
func (o *redisOptions) secret(file *envValue, flagName, env string) (string, error) {
	fromEnv := o.getenv(env)
	if file.value == "" {
		return fromEnv, nil
	}
	if fromEnv != "" {
		return "", fmt.Errorf("%s and $%s both give the password: give it once", file.source(flagName), env)
	}
	b, err := os.ReadFile(file.value)
	if err != nil {
		var perr *os.PathError
		if errors.As(err, &perr) {
			err = perr.Err // the path is in the message already
		}
		return "", fmt.Errorf("%s %s: %w", file.source(flagName), file.value, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("%s %s: want the password on one line", file.source(flagName), file.value)
	}
	return pw, nil
}

// tlsConfig builds the TLS configuration, or nil without TLS. rediss says
// the URL asks for TLS already.
func (o *redisOptions) tlsConfig(rediss bool) (*tls.Config, error) {
	on := rediss || o.ca.value != "" || o.cert.value != "" || o.key.value != "" || o.serverName.value != ""
	if o.tls.value != "" {
		b, err := strconv.ParseBool(o.tls.value)
		if err != nil {
			return nil, fmt.Errorf("%s: want true or false, got %q", o.tls.source("redis-tls"), o.tls.value)
		}
		if !b && on {
			return nil, fmt.Errorf("%s=false, but rediss:// or a TLS option asks for TLS", o.tls.source("redis-tls"))
		}
		on = on || b
	}
	if !on {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.serverName.value}
	if o.ca.value != "" {
		pem, err := os.ReadFile(o.ca.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.ca.source("redis-ca"), err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", o.ca.source("redis-ca"), o.ca.value)
		}
	}
	if (o.cert.value == "") != (o.key.value == "") {
		return nil, errors.New("--redis-cert and --redis-key go together")
	}
	if o.cert.value != "" {
		pair, err := tls.LoadX509KeyPair(o.cert.value, o.key.value)
		if err != nil {
			return nil, fmt.Errorf("--redis-cert %s, --redis-key %s: %w", o.cert.value, o.key.value, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// openRedisStore returns the memory store without a Redis topology, or a
// Redis store on it behind a Fallback to local state. Only an invalid
// configuration is an error: a Redis that is down or misconfigured does
// not stop the broker (startSharedState names the problem).
func openRedisStore(ctx context.Context, o *redisOptions, logger *slog.Logger, bound gateBound) (sharedStore, error) {
	cfg, warnings, err := o.redisConfig()
	if err != nil {
		return sharedStore{}, err
	}
	if cfg.URL == "" && len(cfg.ClusterAddrs) == 0 && cfg.SentinelMaster == "" {
		return sharedStore{store: memstore.New(bound.memory()...), describe: "memory"}, nil
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	local, err := o.localAdmissionTTL()
	if err != nil {
		return sharedStore{}, err
	}
	redis.SetLogger(redisLogger{logger})
	every, err := o.healthEvery()
	if err != nil {
		return sharedStore{}, err
	}
	wait, err := o.startWaitFor()
	if err != nil {
		return sharedStore{}, err
	}
	rs, err := redisstore.Open(ctx, cfg, append(bound.redis(), redisstore.WithLocalAdmission(local))...)
	if err != nil {
		return sharedStore{}, fmt.Errorf("shared store: %w", err)
	}
	fb := store.NewFallback(rs, memstore.New(bound.memory()...), store.WithHealthInterval(every), store.WithStartWait(wait))
	return sharedStore{store: fb, describe: describeRedis(cfg)}, nil
}

// healthEvery is --redis-health-interval as a store.WithHealthInterval
// argument: the store's default when not given, negative (off) for 0.
func (o *redisOptions) healthEvery() (time.Duration, error) {
	d, err := o.healthInterval.duration("redis-health-interval", store.DefaultHealthInterval, 0,
		"want a duration such as 500ms, or 0 to turn the check off", "")
	if err == nil && d == 0 {
		return -1, nil
	}
	return d, err
}

// localAdmissionTTL is --redis-local-admission: redisstore's default when
// not given.
func (o *redisOptions) localAdmissionTTL() (time.Duration, error) {
	return o.localAdmission.duration("redis-local-admission", redisstore.DefaultLocalAdmissionTTL, redisstore.MaxLocalAdmissionTTL,
		"want a duration such as 250ms, or 0 to turn local admission off", ", the longest a lost announcement may go unnoticed")
}

// startWaitFor is --redis-start-wait: DefaultStartWait when not given.
func (o *redisOptions) startWaitFor() (time.Duration, error) {
	return o.startWait.duration("redis-start-wait", DefaultStartWait, maxStartWait, "want a duration such as 5s, or 0 to be ready at once", "")
}

// describeRedis says how the broker reaches Redis, without secrets.
func describeRedis(cfg redisstore.Config) string {
	var b strings.Builder
	switch {
	case cfg.URL != "":
		b.WriteString("redis " + redisstore.Redact(cfg.URL))
	case len(cfg.ClusterAddrs) > 0:
		b.WriteString("redis cluster " + strings.Join(cfg.ClusterAddrs, ","))
	default:
		b.WriteString("redis sentinel " + cfg.SentinelMaster + "@" + strings.Join(cfg.SentinelAddrs, ","))
	}
	if cfg.Username != "" {
		b.WriteString(" user " + cfg.Username)
	}
	if cfg.TLS != nil {
		b.WriteString(" tls")
	}
	return b.String()
}

// startSharedState mirrors the store's health into the health service
// (readiness and SharedState), the metrics and the log. While a Fallback
// starts (its first verification, at most --redis-start-wait), the broker
// as a whole ("") and SharedState report NOT_SERVING; then "" is SERVING,
// and SharedState SERVING while shared state is in use. For the memory
// store it only reports SERVING.
func startSharedState(st store.Store, hs *server.Health, mets *metrics.Metrics, logger *slog.Logger) {
	fb, ok := st.(*store.Fallback)
	if !ok {
		hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_SERVING)
		return
	}
	if rs, ok := fb.Primary().(*redisstore.Store); ok && rs.LocalAdmissionTTL() > 0 {
		mets.WatchLocalAdmission(func() metrics.LocalAdmission {
			ls := rs.LocalAdmissionStats()
			return metrics.LocalAdmission{Admitted: ls.Admitted, Flushed: ls.Flushed, Dropped: ls.Dropped, Live: ls.Live}
		})
	}
	var mu sync.Mutex
	begin := time.Now()
	last := store.Health{Starting: true, Since: begin}
	// apply reads the state itself, so that a change seen late never
	// overwrites a newer one.
	apply := func() {
		mu.Lock()
		defer mu.Unlock()
		h := fb.Health()
		prev := last
		last = h
		mets.SetStoreHealth(h)
		switch {
		case h.Starting:
			if h.Cause != prev.Cause && h.Cause != store.CauseNone {
				what, hint := describeCause(h.Cause)
				logger.Info("shared store "+what+": not ready yet, still verifying it", "cause", string(h.Cause), "detail", h.Detail, "hint", hint)
			}
			return
		case h.Degraded && (!prev.Degraded || prev.Cause != h.Cause):
			what, hint := describeCause(h.Cause)
			logger.Warn("shared store "+what+": serving on local state until it recovers (fail-closed policies fail their calls)",
				"cause", string(h.Cause), "detail", h.Detail, "hint", hint)
			hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING)
		case !h.Degraded && prev.Starting:
			logger.Info("shared store verified: the broker's scripts run on it", "after", time.Since(begin).Round(time.Millisecond).String())
			hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_SERVING)
		case !h.Degraded && prev.Degraded:
			logger.Info("shared store recovered", "cause_was", string(prev.Cause), "after", h.Since.Sub(prev.Since).Round(time.Millisecond).String())
			hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_SERVING)
		}
		hs.SetReady(true)
	}
	mets.SetStoreHealth(store.Health{})
	starting := fb.Health().Starting
	if starting {
		hs.SetReady(false)
		hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING)
		logger.Info("verifying the shared store before serving (health NOT_SERVING until then)")
	} else {
		last = store.Health{Since: begin}
		hs.SetServingStatus(StoreHealthService, healthpb.HealthCheckResponse_SERVING)
	}
	fb.OnHealthChange(func(store.Health) { apply() })
	apply() // a change before the registration
	if !starting {
		// --redis-start-wait 0: ready at once, and a misconfiguration is
		// still named at once.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), startVerifyTimeout)
			defer cancel()
			if err := fb.Verify(ctx); err == nil {
				logger.Info("shared store verified: the broker's scripts run on it")
			}
		}()
	}
}

// describeCause says what a cause means and what to check, for the log.
func describeCause(c store.Cause) (what, hint string) {
	switch c {
	case store.CauseUnreachable:
		return "unreachable", "check that Redis runs and that the address is right"
	case store.CauseMoved:
		return "is a Redis Cluster behind a single-node client (MOVED)", "use --redis-cluster with the nodes' addresses instead of --redis"
	case store.CauseCrossSlot:
		return "refused keys of several slots (CROSSSLOT)", "the keys of one call share a hash tag: report this with the detail"
	case store.CauseNoPerm:
		return "refuses the ACL user a command or key (NOPERM)", "grant the user the commands of docs/operations.md on the keys ~rb:v1:* and the channels &rb:v1:*"
	case store.CauseWrongPass:
		return "refuses the credentials (WRONGPASS, NOAUTH)", "check --redis-user and the password (--redis-password-file or $" + envPassword + ")"
	case store.CauseOOM:
		return "is out of memory and refuses writes (OOM)", "raise maxmemory, or use an evicting maxmemory-policy such as volatile-ttl"
	case store.CauseReadOnly:
		return "is a read-only replica (READONLY)", "point --redis at the master, or use --redis-sentinel or --redis-cluster"
	case store.CauseNotCluster:
		return "is not a Redis Cluster node", "use --redis with the server's URL instead of --redis-cluster"
	case store.CauseClusterDown:
		return "cluster does not serve every slot (CLUSTERDOWN)", "wait for the failover to finish, or check the cluster's state"
	case store.CauseMasterDown:
		return "replica lost its master (MASTERDOWN)", "check the master and the replication link"
	case store.CauseLoading:
		return "is loading its data set (LOADING)", "wait for Redis to finish loading"
	case store.CauseTLS:
		return "failed the TLS handshake", "check --redis-ca, --redis-cert and --redis-key, and --redis-tls-server-name"
	case store.CauseSentinel:
		return "sentinels name no such master", "check the master name in --redis-sentinel and that the addresses are sentinels"
	case store.CauseUnexpected:
		return "gave unexpected results to the broker's scripts", "check that it is Redis, or a server that runs Lua scripts as Redis does"
	}
	return "answered an error", "see the detail"
}

// sharedStateHandler serves GET SharedStateHealthPath: the shared store's
// state as JSON, 200 while it is in use (or for the memory store), 503
// while starting (not verified yet) or degraded. The detail never holds a password.
func sharedStateHandler(st store.Store, describe string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := struct {
			Status string `json:"status"`
			Store  string `json:"store"`
			Cause  string `json:"cause,omitempty"`
			Detail string `json:"detail,omitempty"`
			Since  string `json:"since,omitempty"`
		}{Status: "ok", Store: describe}
		code := http.StatusOK
		if fb, ok := st.(*store.Fallback); ok {
			h := fb.Health()
			body.Since = h.Since.UTC().Format(time.RFC3339Nano)
			switch {
			case h.Starting:
				body.Status, body.Cause, body.Detail = "starting", string(h.Cause), h.Detail
				code = http.StatusServiceUnavailable
			case h.Degraded:
				body.Status, body.Cause, body.Detail = "degraded", string(h.Cause), h.Detail
				code = http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// metricsMux serves the metrics at /metrics and the shared store's state
// at SharedStateHealthPath.
func metricsMux(metricsHandler http.Handler, st store.Store, describe string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler)
	mux.Handle(SharedStateHealthPath, sharedStateHandler(st, describe))
	return mux
}

// hasURLPassword reports whether a Redis URL holds a password.
func hasURLPassword(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return false
	}
	_, ok := u.User.Password()
	return ok
}

// hasURLCredentials reports whether a Redis URL holds a user or a
// password.
func hasURLCredentials(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil
}

// redactAny redacts a URL's password; other values pass unchanged.
func redactAny(s string) string {
	if strings.Contains(s, "://") {
		return redisstore.Redact(s)
	}
	return s
}
