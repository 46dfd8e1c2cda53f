package store

import "strings"

// keepByte reports whether b stands for itself in EscapeComponent's form.
func keepByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// EscapeComponent percent-escapes every byte of s outside [A-Za-z0-9._~-]
// (upper-case hex). The result never contains ':', '{', '}' or a bare '%',
// and distinct inputs give distinct outputs: it is the form of a gate's
// listing position (GatePosition) and of the Redis store's key components.
func EscapeComponent(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keepByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keepByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// UnescapeComponent reverses EscapeComponent; ok is false for a string
// EscapeComponent cannot return.
func UnescapeComponent(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if !keepByte(s[i]) {
				return "", false
			}
		}
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !keepByte(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// GatePosition is a gate's place in a listing's order (what
// ListGatesRequest.After and GatePage.Next hold): its scope and credential,
// each escaped by EscapeComponent, joined by ':'. Every store lists in this
// order.
func GatePosition(scope, credential string) string {
	return EscapeComponent(scope) + ":" + EscapeComponent(credential)
}

// ParseGatePosition reverses GatePosition; ok is false for "" or a string
// GatePosition cannot return.
func ParseGatePosition(p string) (scope, credential string, ok bool) {
	sc, cr, ok := strings.Cut(p, ":")
	if !ok {
		return "", "", false
	}
	scope, ok1 := UnescapeComponent(sc)
	credential, ok2 := UnescapeComponent(cr)
	if !ok1 || !ok2 {
		return "", "", false
	}
	return scope, credential, true
}
