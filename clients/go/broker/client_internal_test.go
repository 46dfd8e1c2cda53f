package broker

import "testing"

func TestIsLoopbackTarget(t *testing.T) {
	for target, want := range map[string]bool{
		"127.0.0.1:50051":               true,
		"127.9.9.9:1":                   true,
		"[::1]:50051":                   true,
		"localhost:50051":               true,
		"LOCALHOST:1":                   true,
		"dns:///localhost:50051":        true,
		"dns://8.8.8.8/localhost:50051": true,
		"passthrough:///127.0.0.1:1":    true,
		"ipv4:127.0.0.1:50051":          true,
		"unix:///run/broker.sock":       true,
		"[::ffff:127.0.0.1]:1":          true,
		"broker.internal:50051":         false,
		"10.0.0.1:50051":                false,
		"dns:///broker.internal:443":    false,
		"localhost.evil.com:1":          false,
		"0.0.0.0:50051":                 false,
		"":                              false,
	} {
		if got := isLoopbackTarget(target); got != want {
			t.Errorf("isLoopbackTarget(%q) = %v, want %v", target, got, want)
		}
	}
}
