package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// BenchmarkAccessLog is the access log's cost per successful unary call
// (the interceptor alone, around a handler that does nothing), side by
// side in one run:
//   - "library/warn": go-grpc-middleware's logging interceptor with a
//     logger at warn, as the server used it before accessLog (the
//     baseline): it builds the line's fields, and the logger drops it;
//   - "gated/warn": accessLog at warn, which runs the call without it;
//   - "gated/info": accessLog at info, which logs the line (to io.Discard).
func BenchmarkAccessLog(b *testing.B) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}})
	info := &grpc.UnaryServerInfo{FullMethod: "/retrybroker.v1.BrokerService/Execute"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	at := func(l slog.Level) *slog.Logger {
		return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: l}))
	}
	warn := at(slog.LevelWarn)
	library := logging.UnaryServerInterceptor(logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		warn.Log(ctx, slog.Level(lvl), msg, fields...)
	}), logging.WithLogOnEvents(logging.FinishCall))
	for _, c := range []struct {
		name string
		ic   grpc.UnaryServerInterceptor
	}{
		{"library/warn", library},
		{"gated/warn", newAccessLog(warn).unary},
		{"gated/info", newAccessLog(at(slog.LevelInfo)).unary},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.ic(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
