package redisstore_test

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/store/redisstore"
)

func TestParseAddrs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"10.0.0.1:6379", []string{"10.0.0.1:6379"}},
		{" redis-1:7000 , redis-2:7001,[::1]:7002 ", []string{"redis-1:7000", "redis-2:7001", "[::1]:7002"}},
		{"", nil},
		{"redis-1", nil},
		{"redis-1:7000,", nil},
		{"redis-1:7000,redis-1:7000", nil},
		{":7000", nil},
		{"redis-1:0", nil},
		{"redis-1:65536", nil},
		{"red is:7000", nil},
		{"redis-1:http", nil},
	} {
		got, err := redisstore.ParseAddrs(c.in)
		if c.want == nil {
			if err == nil {
				t.Errorf("ParseAddrs(%q) = %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseAddrs(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseSentinel(t *testing.T) {
	m, addrs, err := redisstore.ParseSentinel("mymaster@10.0.0.1:26379, 10.0.0.2:26379")
	if err != nil || m != "mymaster" || !slices.Equal(addrs, []string{"10.0.0.1:26379", "10.0.0.2:26379"}) {
		t.Fatalf("ParseSentinel = %q %q %v", m, addrs, err)
	}
	for _, in := range []string{"mymaster", "@10.0.0.1:26379", "my master@h:1", "m@", "m@h", "a,b@h:1"} {
		if m, addrs, err := redisstore.ParseSentinel(in); err == nil {
			t.Errorf("ParseSentinel(%q) = %q %q, want an error", in, m, addrs)
		}
	}
}

// FuzzParseAddrs checks that accepted lists hold only host:port pairs, at
// most 1000 and no duplicate, and parse the same when joined again.
func FuzzParseAddrs(f *testing.F) {
	f.Add("10.0.0.1:6379")
	f.Add("a:1,b:2, [::1]:3")
	f.Add("a:1,,b:2")
	f.Fuzz(func(t *testing.T, s string) {
		addrs, err := redisstore.ParseAddrs(s)
		if err != nil {
			return
		}
		if len(addrs) == 0 || len(addrs) > 1000 {
			t.Fatalf("ParseAddrs(%q) = %d addresses", s, len(addrs))
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" || strings.TrimSpace(a) != a {
				t.Fatalf("ParseAddrs(%q) accepted %q", s, a)
			}
			if seen[a] {
				t.Fatalf("ParseAddrs(%q) kept the duplicate %q", s, a)
			}
			seen[a] = true
		}
		again, err := redisstore.ParseAddrs(strings.Join(addrs, ","))
		if err != nil || !slices.Equal(again, addrs) {
			t.Fatalf("ParseAddrs(join(%q)) = %q, %v", addrs, again, err)
		}
	})
}

// FuzzParseSentinel checks that an accepted value has a master name
// without '@', ',' or spaces and addresses ParseAddrs accepts.
func FuzzParseSentinel(f *testing.F) {
	f.Add("mymaster@10.0.0.1:26379")
	f.Add("m@a:1,b:2")
	f.Add("m@@a:1")
	f.Fuzz(func(t *testing.T, s string) {
		m, addrs, err := redisstore.ParseSentinel(s)
		if err != nil {
			return
		}
		if m == "" || strings.ContainsAny(m, "@, \t\r\n") {
			t.Fatalf("ParseSentinel(%q): master %q", s, m)
		}
		if again, err := redisstore.ParseAddrs(strings.Join(addrs, ",")); err != nil || !slices.Equal(again, addrs) {
			t.Fatalf("ParseSentinel(%q): addresses %q do not parse again (%v)", s, addrs, err)
		}
	})
}
