package egress_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func BenchmarkGuardCheck(b *testing.B) {
	g, err := egress.NewGuard(egress.AllowPrefixes(netip.MustParsePrefix("127.0.0.1/32")), egress.AllowPorts(443))
	if err != nil {
		b.Fatal(err)
	}
	addrs := []netip.AddrPort{
		netip.MustParseAddrPort("93.184.216.34:443"),
		netip.MustParseAddrPort("[2606:4700:4700::1111]:443"),
		netip.MustParseAddrPort("[64:ff9b::808:808]:443"),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := g.Check(addrs[i%len(addrs)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGuardCheckRefused(b *testing.B) {
	ap := netip.MustParseAddrPort("10.0.0.1:443")
	var g *egress.Guard
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Check(ap); err == nil {
			b.Fatal("allowed")
		}
	}
}

func BenchmarkRedactURLString(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = egress.RedactURLString("https://user:pw@api.example.com/v1/items?api_key=abc&page=2#frag")
	}
}

func BenchmarkClassify(b *testing.B) {
	err := errors.Join(errors.New("x"), &egress.RefusedError{Reason: "r"})
	b.ReportAllocs()
	for b.Loop() {
		_ = egress.Classify(err)
	}
}
