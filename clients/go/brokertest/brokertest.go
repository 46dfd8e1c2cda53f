package brokertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Broker is an in-process retry broker: the real gRPC service, engine and
// memory store, served on an in-memory listener, with a fake clock and a
// canned upstream. Create one with New (in a test) or Start.
type Broker struct {
	tb       testing.TB
	clock    *Clock
	upstream *Upstream
	gs       *grpc.Server
	lis      *bufconn.Listener
	conn     *grpc.ClientConn
	store    *memstore.Store
	served   chan struct{}
	once     sync.Once
}

// New starts a Broker for the test and closes it when the test ends
// (t.Cleanup). It fails the test when an option is invalid.
func New(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	b, err := Start(opts...)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	b.tb = t
	t.Cleanup(b.Close)
	return b
}

// Start starts a Broker outside a test (examples, TestMain). Close it.
//
// The test tenant needs no API key, may call any URL (requests go to the
// canned upstream, never to the network) and has the standard policy as
// its default, changed by the PolicyOptions in opts.
func Start(opts ...Option) (*Broker, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	ten, err := tenant.Dev(nil)
	if err != nil {
		return nil, err
	}
	def := ten.Policies[tenant.DefaultPolicyName]
	for _, o := range cfg.defaults {
		o.f(def)
	}
	if err := def.Validate(); err != nil {
		return nil, fmt.Errorf("default policy: %w", err)
	}
	for _, name := range cfg.order {
		if name == "" {
			return nil, errors.New("WithNamedPolicy: empty name")
		}
		p := tenant.DefaultPolicy()
		p.Name = name
		if name == tenant.DefaultPolicyName {
			p = def
		}
		for _, o := range cfg.named[name] {
			o.f(p)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("policy %q: %w", name, err)
		}
		ten.Policies[name] = p
	}

	fc := engine.NewFakeClock(time.Now())
	b := &Broker{
		clock:    &Clock{fc: fc},
		upstream: &Upstream{clock: fc},
		store:    memstore.New(),
		lis:      bufconn.Listen(1 << 20),
		served:   make(chan struct{}),
	}
	exec := &server.Executor{
		Runner:  engine.NewRunner(b.store, engine.WithClock(fc)),
		Clients: cannedClients{b.upstream},
	}
	svc := server.New(server.WithDefaultTenant(ten), server.WithExecutor(exec), server.WithClock(fc))
	b.gs, _ = server.NewGRPCServer(svc, server.GRPCConfig{
		Logger:       slog.New(slog.DiscardHandler),
		ExtraOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(fakeDeadlines(fc)), grpc.ChainStreamInterceptor(fakeStreamDeadlines(fc))},
	})
	go func() {
		defer close(b.served)
		_ = b.gs.Serve(b.lis)
	}()
	b.conn, err = grpc.NewClient("passthrough:///brokertest",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return b.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
	)
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// cannedClients gives every policy a client over the canned upstream (there
// is no network to guard) that follows redirects as the policy says.
type cannedClients struct{ upstream *Upstream }

func (c cannedClients) For(r *egress.Rules) (*http.Client, error) {
	limit := r.MaxRedirects()
	return &http.Client{
		Transport: c.upstream,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > limit {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}, nil
}

// Close stops the broker and closes its connection; clients from Client
// fail afterwards. It is idempotent. New calls it at the end of the test.
func (b *Broker) Close() {
	b.once.Do(func() {
		if b.conn != nil {
			_ = b.conn.Close()
		}
		b.gs.Stop()
		<-b.served
		_ = b.store.Close()
	})
}

// Client returns a client of this broker over the in-memory connection.
// opts are client options such as broker.WithDefaultPolicy; transport
// options do not apply. Closing the client is optional: the broker closes
// the connection. Invalid options fail the test (or panic, for a Broker
// from Start).
func (b *Broker) Client(opts ...broker.Option) *broker.Client {
	c, err := broker.New("", append([]broker.Option{broker.WithConn(b.conn)}, opts...)...)
	if err != nil {
		if b.tb != nil {
			b.tb.Helper()
			b.tb.Fatalf("brokertest: %v", err)
		}
		panic(fmt.Sprintf("brokertest: %v", err))
	}
	return c
}

// Conn returns the in-memory gRPC connection to the broker, for code that
// takes a *grpc.ClientConn.
func (b *Broker) Conn() *grpc.ClientConn { return b.conn }

// Reply makes every request whose URL starts with urlPrefix get status and
// the header lines ("Name: value"). See Upstream.Script for matching.
func (b *Broker) Reply(urlPrefix string, status int, headers ...string) {
	b.Script(urlPrefix, Status(status, headers...))
}

// Script makes requests whose URL starts with urlPrefix get replies in
// order, the last one repeating. See Upstream.Script. An invalid reply
// fails the test (or panics, for a Broker from Start).
func (b *Broker) Script(urlPrefix string, replies ...Reply) {
	if err := b.upstream.Script(urlPrefix, replies...); err != nil {
		if b.tb != nil {
			b.tb.Helper()
			b.tb.Fatal(err)
		}
		panic(err)
	}
}

// Requests returns the upstream requests the broker sent, in order, with
// the fake time of their arrival.
func (b *Broker) Requests() []Request { return b.upstream.Requests() }

// Upstream returns the canned upstream.
func (b *Broker) Upstream() *Upstream { return b.upstream }

// Clock returns the broker's fake clock.
func (b *Broker) Clock() *Clock { return b.clock }

// fakeDeadlines moves deadlines onto the fake clock, keeping the time
// left: the gRPC deadline of every call (a real time) and the deadline of a
// ClassifyResponse request that gives no clock of its own. A call with 1.5s
// left is then told that a 5s hint is too long, however far the fake clock
// has run ahead of (or behind) the real one. Cancellation stays real.
func fakeDeadlines(fc *engine.FakeClock) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		now := time.Now()
		if dl, ok := ctx.Deadline(); ok {
			ctx = fakeDeadlineCtx{Context: ctx, deadline: fc.Now().Add(dl.Sub(now))}
		}
		if cr, ok := req.(*rbv1.ClassifyResponseRequest); ok && cr.GetDeadline() != nil && cr.GetNow() == nil {
			cr.Deadline = timestamppb.New(fc.Now().Add(cr.GetDeadline().AsTime().Sub(now)))
		}
		return h(ctx, req)
	}
}

// fakeStreamDeadlines does for ExecuteStream what fakeDeadlines does for
// the unary calls: the stream's gRPC deadline is moved onto the fake
// clock, keeping the time left.
func fakeStreamDeadlines(fc *engine.FakeClock) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if dl, ok := ss.Context().Deadline(); ok {
			ss = fakeDeadlineStream{ServerStream: ss, ctx: fakeDeadlineCtx{Context: ss.Context(), deadline: fc.Now().Add(time.Until(dl))}}
		}
		return h(srv, ss)
	}
}

// fakeDeadlineStream is a server stream whose context has a fake deadline.
type fakeDeadlineStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeDeadlineStream) Context() context.Context { return s.ctx }

// fakeDeadlineCtx reports a deadline on the fake clock; Done and Err stay
// those of the real context.
type fakeDeadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c fakeDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Clock is the broker's fake clock. The broker's waits (backoff, hints,
// cooldown gates) advance it at once instead of waiting. Deadlines are
// moved onto it, keeping the time left, so that a call with a 1.5s
// deadline is told that a 5s hint is too long. It also serves as a
// broker.Sleeper, so that broker.Retry in a test waits on it too.
type Clock struct{ fc *engine.FakeClock }

// Now returns the fake time.
func (c *Clock) Now() time.Time { return c.fc.Now() }

// Advance moves the clock forward by d, for example to let a cooldown
// gate reopen.
func (c *Clock) Advance(d time.Duration) { c.fc.Advance(d) }

// Sleep advances the clock by d at once and returns ctx.Err().
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error { return c.fc.Sleep(ctx, d) }

// Sleeps returns every wait so far, in order: the broker's and those of
// Sleep.
func (c *Clock) Sleeps() []time.Duration { return c.fc.Sleeps() }
