package config

import (
	"fmt"
	"math"
	"strings"
)

// byteUnits are the size suffixes ParseByteSize accepts, matched without
// regard to case.
var byteUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"KB", 1000},
	{"MB", 1000 * 1000},
	{"GB", 1000 * 1000 * 1000},
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
}

// ParseByteSize parses a size in bytes: ASCII digits, then optionally
// spaces and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers
// of 1024), in any case. "1MiB" is 1048576 and "1MB" is 1000000. There is
// no sign, fraction or exponent; a bare "K" or "M" is refused because it is
// ambiguous. A value that overflows int64 is an error.
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("invalid size %s: want a whole number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB), for example 1MiB", describe(s))
	}
	var n int64
	for _, c := range t[:i] {
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("size %s is too large", describe(s))
		}
		n = n*10 + d
	}
	unit := strings.TrimSpace(t[i:])
	if unit == "" {
		return n, nil
	}
	for _, u := range byteUnits {
		if strings.EqualFold(unit, u.name) {
			if n > math.MaxInt64/u.mult {
				return 0, fmt.Errorf("size %s is too large", describe(s))
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("invalid size %s: unknown unit %s (want B, KB, MB, GB, KiB, MiB or GiB)", describe(s), describe(unit))
}
