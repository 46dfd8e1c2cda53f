package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// TestListTenThousandGates pages (1000 a page) through a tenant's 10,000
// closed gates, the default bound: each is listed exactly once.
func TestListTenThousandGates(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	storetest.FillGates(t, s, "acme", 10_000)
	storetest.FillGates(t, s, "globex", 10)
	gates, pages, err := storetest.ListEvery(context.Background(), s, "acme", 1000, storetest.T0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckListedOnce(t, gates, "acme", 10_000)
	if pages != 10 {
		t.Fatalf("pages = %d, want 10", pages)
	}
}

// BenchmarkListGates10k lists a tenant's 10,000 closed gates, 1000 a page:
// one op is the whole listing (target: at most 100 ms, issue 21).
func BenchmarkListGates10k(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	storetest.FillGates(b, s, "acme", 10_000)
	now := storetest.T0.Add(time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		gates, _, err := storetest.ListEvery(context.Background(), s, "acme", 1000, now)
		if err != nil || len(gates) != 10_000 {
			b.Fatalf("listed %d, %v", len(gates), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/listing")
}
