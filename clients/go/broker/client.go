package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// Message size limits of the client. The broker sends final response
// bodies of up to 64 MiB (a policy's max_response_body) plus up to 1 MiB of
// headers and the attempts (its send limit is 64 MiB + 1 MiB + about 1 MiB),
// and accepts requests of up to 10 MiB.
const (
	maxRecvMsgSize = 67 << 20
	maxSendMsgSize = 10 << 20
	// DefaultMaxRequestBody is the default limit of the request bodies
	// Execute reads (8 MiB, the most the broker accepts). A tenant's policy
	// usually allows less (max_request_body, default 1 MiB); the broker
	// refuses a larger body with INVALID_ARGUMENT before sending anything.
	DefaultMaxRequestBody = 8 << 20
)

// Client calls a retry broker. It is safe for concurrent use. Create one
// per broker and share it; Close it when done.
type Client struct {
	rpc           rbv1.BrokerServiceClient
	conn          *grpc.ClientConn
	ownsConn      bool
	callOpts      []grpc.CallOption
	defaultPolicy string
	maxBody       int64
}

type clientConfig struct {
	apiKey        string
	hasKey        bool
	tls           *tls.Config
	insecure      bool
	defaultPolicy string
	dialOpts      []grpc.DialOption
	conn          *grpc.ClientConn
	maxBody       int64
}

// Option configures New.
type Option func(*clientConfig)

// WithAPIKey authenticates every call with the tenant's API key, sent as
// "authorization: Bearer <key>" metadata. The key is never sent in
// plaintext to a non-loopback broker: New fails unless the connection uses
// TLS (the default for non-loopback targets, or WithTLS) or WithInsecure
// is given explicitly.
func WithAPIKey(key string) Option {
	return func(c *clientConfig) { c.apiKey, c.hasKey = key, true }
}

// WithTLS connects with TLS using cfg (nil means the system roots). Use it
// for mTLS by setting cfg.Certificates.
func WithTLS(cfg *tls.Config) Option {
	return func(c *clientConfig) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg
	}
}

// WithInsecure connects in plaintext, also to a non-loopback broker, and
// lets WithAPIKey send the key over it. Loopback targets (127.0.0.1,
// [::1], localhost, unix sockets) are plaintext by default and need no
// WithInsecure.
func WithInsecure() Option { return func(c *clientConfig) { c.insecure = true } }

// WithDefaultPolicy names the tenant policy used by Execute, Classify and
// Retry when a call does not name one with Policy. Empty means the
// tenant's default.
func WithDefaultPolicy(name string) Option {
	return func(c *clientConfig) { c.defaultPolicy = name }
}

// WithDialOptions adds gRPC dial options (interceptors, keepalive, a
// custom dialer, ...). They cannot turn gRPC retries back on: the client
// always dials with grpc.WithDisableRetry (see the package doc).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *clientConfig) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithConn uses an existing connection instead of dialing target (for
// example brokertest's in-memory one). The caller keeps ownership: Close
// does not close conn. WithTLS, WithInsecure and WithDialOptions do not
// apply; dial conn with grpc.WithDisableRetry. WithAPIKey still works, and
// requires WithInsecure when conn's target is not a loopback address and
// the connection is not secure.
func WithConn(conn *grpc.ClientConn) Option {
	return func(c *clientConfig) { c.conn = conn }
}

// WithMaxRequestBody sets the largest request body Execute reads, in bytes
// (default DefaultMaxRequestBody). A longer body fails with
// ErrRequestBodyTooLarge before anything is sent.
func WithMaxRequestBody(n int64) Option {
	return func(c *clientConfig) { c.maxBody = n }
}

// New returns a client of the broker at target, a gRPC target such as
// "127.0.0.1:50051" or "dns:///broker.internal:50051".
//
// Transport security: WithTLS uses TLS; WithInsecure uses plaintext; with
// neither, loopback targets (the `make run` broker) use plaintext and all
// others use TLS with the system roots. New does not connect; the first
// call does.
func New(target string, opts ...Option) (*Client, error) {
	cfg := clientConfig{maxBody: DefaultMaxRequestBody}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tls != nil && cfg.insecure {
		return nil, errors.New("broker: WithTLS and WithInsecure contradict each other")
	}
	if cfg.hasKey && cfg.apiKey == "" {
		return nil, errors.New("broker: WithAPIKey: the key is empty")
	}
	if cfg.maxBody <= 0 {
		return nil, fmt.Errorf("broker: WithMaxRequestBody: must be positive, got %d", cfg.maxBody)
	}
	c := &Client{
		defaultPolicy: cfg.defaultPolicy,
		maxBody:       cfg.maxBody,
		callOpts:      []grpc.CallOption{grpc.MaxCallRecvMsgSize(maxRecvMsgSize), grpc.MaxCallSendMsgSize(maxSendMsgSize)},
	}
	if cfg.conn != nil {
		c.conn = cfg.conn
		if target == "" {
			target = cfg.conn.Target()
		}
	}
	loopback := isLoopbackTarget(target)
	if cfg.hasKey {
		// Sent per call (not as a dial option) so that it also applies to a
		// borrowed connection. grpc-go refuses to send it over an insecure
		// connection when RequireTransportSecurity is true.
		c.callOpts = append(c.callOpts, grpc.PerRPCCredentials(bearer{key: cfg.apiKey, requireTLS: !cfg.insecure && !loopback}))
	}
	if c.conn == nil {
		var creds credentials.TransportCredentials
		switch {
		case cfg.tls != nil:
			creds = credentials.NewTLS(cfg.tls)
		case cfg.insecure || loopback:
			creds = insecure.NewCredentials()
		default:
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
		dopts := make([]grpc.DialOption, 0, len(cfg.dialOpts)+2)
		dopts = append(dopts, grpc.WithTransportCredentials(creds))
		dopts = append(dopts, cfg.dialOpts...)
		// Last, so that nothing the caller passes can re-enable retries.
		dopts = append(dopts, grpc.WithDisableRetry())
		conn, err := grpc.NewClient(target, dopts...)
		if err != nil {
			return nil, fmt.Errorf("broker: connect to %q: %w", target, err)
		}
		c.conn, c.ownsConn = conn, true
	}
	c.rpc = rbv1.NewBrokerServiceClient(c.conn)
	return c, nil
}

// Close closes the connection (unless it was given with WithConn).
// Calls in flight fail with CANCELED.
func (c *Client) Close() error {
	if !c.ownsConn {
		return nil
	}
	return c.conn.Close()
}

func (c *Client) policyName(explicit string, set bool) string {
	if set {
		return explicit
	}
	return c.defaultPolicy
}

// bearer is the per-RPC credential of WithAPIKey.
type bearer struct {
	key        string
	requireTLS bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.key}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }

// isLoopbackTarget reports whether a gRPC target names this machine: a
// loopback IP, "localhost", or a unix socket.
func isLoopbackTarget(target string) bool {
	t := target
	if strings.HasPrefix(t, "unix:") || strings.HasPrefix(t, "unix-abstract:") {
		return true
	}
	for _, scheme := range []string{"dns:", "passthrough:", "ipv4:", "ipv6:"} {
		if rest, ok := strings.CutPrefix(t, scheme); ok {
			t = rest
			if strings.HasPrefix(t, "//") { // dns://authority/host:port
				t = t[2:]
				if i := strings.IndexByte(t, '/'); i >= 0 {
					t = t[i+1:]
				}
			}
			break
		}
	}
	host := t
	if h, _, err := net.SplitHostPort(t); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
