package redisstore

import (
	"errors"
	"fmt"
	"strings"
)

// maxAddrs bounds how many addresses one list may hold.
const maxAddrs = 1000

// ParseAddrs parses a comma-separated list of host:port addresses
// ("10.0.0.1:6379,redis-2:6379", IPv6 as "[::1]:6379"), as
// --redis-cluster takes seed nodes. Spaces around an address are ignored;
// an empty list, an empty element, a duplicate, or more than 1000
// addresses is an error.
func ParseAddrs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no address")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxAddrs {
		return nil, fmt.Errorf("more than %d addresses", maxAddrs)
	}
	out := make([]string, 0, len(parts))
	seen := make(map[string]bool, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, errors.New("empty address in the list")
		}
		if err := checkAddrs("", []string{p}); err != nil {
			return nil, fmt.Errorf("%q is not host:port", p)
		}
		if seen[p] {
			return nil, fmt.Errorf("%q given twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// ParseSentinel parses MASTER@ADDR,ADDR,..., as --redis-sentinel takes it:
// the master's name as the sentinels know it (no '@', ',' or spaces), then
// the sentinels' addresses as ParseAddrs reads them.
func ParseSentinel(s string) (master string, addrs []string, err error) {
	master, list, ok := strings.Cut(s, "@")
	if !ok {
		return "", nil, errors.New("want MASTER@HOST:PORT[,HOST:PORT...]")
	}
	if master == "" || strings.ContainsAny(master, ", \t\r\n") {
		return "", nil, fmt.Errorf("master name %q: want a non-empty name without ',' or spaces", master)
	}
	if addrs, err = ParseAddrs(list); err != nil {
		return "", nil, fmt.Errorf("sentinels: %w", err)
	}
	return master, addrs, nil
}
