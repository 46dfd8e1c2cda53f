package server_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// BenchmarkClassifyHandler calls the broker's ClassifyResponse handler and
// the empty handler directly, without gRPC, one call at a time, with the
// suite's request (a 429 with Retry-After): the difference of their ns/op
// and allocs/op is the broker's own work per call, which lies on the
// critical path of the suite's one-caller ClassifyResponse row. The
// "+codec" cases add what the handler's answer costs gRPC: its encoding.
func BenchmarkClassifyHandler(b *testing.B) {
	req := baseline.ClassifyRequest()
	dev, err := tenant.Dev(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		svc  rbv1.BrokerServiceServer
	}{
		{"empty-handler", baseline.EmptyService{}},
		{"broker", server.New(server.WithDefaultTenant(dev))},
	} {
		for _, codec := range []bool{false, true} {
			name := c.name
			if codec {
				name += "+codec"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ctx, cancel := context.WithCancel(context.Background())
					resp, err := c.svc.ClassifyResponse(ctx, req)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if codec {
						if _, err := proto.Marshal(resp); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
