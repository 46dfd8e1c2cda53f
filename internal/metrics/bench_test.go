package metrics

import (
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// BenchmarkCallEvents is what the new metrics add to one Execute call on a
// shared store: the call's end, and an Admit and a Complete round trip.
func BenchmarkCallEvents(b *testing.B) {
	m := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.StoreRoundTrip("admit", 300*time.Microsecond, false)
			m.StoreRoundTrip("complete", 300*time.Microsecond, false)
			m.CallDone("execute", engine.OutcomeSuccess, 1, 20*time.Millisecond)
		}
	})
}
