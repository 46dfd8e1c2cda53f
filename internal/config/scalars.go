package config

import (
	"errors"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// kind parses one kind of scalar. Kinds are empty struct types; parse
// returns an error from errAt for a value it refuses, and never repeats a
// value that may be a secret.
type kind[T any] interface {
	parse(n *yaml.Node) (T, error)
}

// scalar is a decoded scalar of kind K: its value V and where it was
// written. A new kind of value (a CEL expression, a header format) is a new
// kind type with a parse method; scalar gives it a position and
// UnmarshalYAML.
type scalar[T any, K kind[T]] struct {
	at
	V T
}

// UnmarshalYAML parses n with K, recording n. On error V keeps its zero
// value.
func (s *scalar[T, K]) UnmarshalYAML(n *yaml.Node) error {
	s.node = n
	var k K
	v, err := k.parse(n)
	if err != nil {
		return err
	}
	s.V = v
	return nil
}

// set stores s's value in dst when s is set (not nil).
func set[T any, K kind[T]](dst *T, s *scalar[T, K]) {
	if s != nil {
		*dst = s.V
	}
}

// values returns the values of decoded scalars.
func values[T any, K kind[T]](items []scalar[T, K]) []T {
	if len(items) == 0 {
		return nil
	}
	out := make([]T, len(items))
	for i := range items {
		out[i] = items[i].V
	}
	return out
}

// The scalar types of the file.
type (
	// str is any non-null scalar, as its text.
	str = scalar[string, strKind]
	// boolean is true or false; YAML 1.1 spellings (yes, on) are refused.
	boolean = scalar[bool, boolKind]
	// number is a finite number (integers accepted).
	number = scalar[float64, numberKind]
	// duration is a Go duration ("1.5s", "2m", "1h30m"), with a unit.
	// Negative values pass, for the range checks of the field.
	duration = scalar[time.Duration, durationKind]
	// size is a byte size: an integer number of bytes or a string with a
	// unit (see ParseByteSize). A negative integer passes, for the range
	// checks of the field.
	size = scalar[int64, sizeKind]
	// intIn is a whole number within the bounds of R.
	intIn[R intRange] = scalar[int, intKind[R]]
	// prefix is an allowed destination: a CIDR, or one address as a /32
	// or /128.
	prefix = scalar[netip.Prefix, prefixKind]
	// hostPattern is a host name or "*.suffix" pattern, in lower case.
	hostPattern = scalar[string, hostPatternKind]
	// header is an RFC 9110 header name.
	header = scalar[string, headerKind]
	// idempotencyHeader is a header name that may not be empty.
	idempotencyHeader = scalar[string, idempotencyHeaderKind]
	// attemptHeader is a header name, or "" for none.
	attemptHeader = scalar[string, attemptHeaderKind]
	// jitter is full, equal or none.
	jitter = scalar[engine.JitterMode, jitterKind]
	// readerPosition is before (false) or after (true).
	readerPosition = scalar[bool, readerPositionKind]
	// apiKeyHash is the SHA-256 of an API key, as 64 hex digits.
	apiKeyHash = scalar[[32]byte, apiKeyHashKind]
	// identity is an mTLS identity: a URI SAN or a subject.
	identity = scalar[string, identityKind]
)

// text returns a scalar's text; want describes the expected value for the
// message when n is null or not a scalar.
func text(n *yaml.Node, want string) (string, error) {
	if n.Kind == yaml.AliasNode {
		return "", errAlias(n)
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", errAt(n, "want %s, got %s", want, kindName(n))
	}
	return n.Value, nil
}

type strKind struct{}

func (strKind) parse(n *yaml.Node) (string, error) { return text(n, "a string") }

type boolKind struct{}

func (boolKind) parse(n *yaml.Node) (bool, error) {
	s, err := text(n, "true or false")
	if err != nil {
		return false, err
	}
	if n.ShortTag() != "!!bool" {
		return false, errAt(n, "want true or false, got %s", kindName(n))
	}
	return strings.EqualFold(s, "true"), nil
}

type numberKind struct{}

func (numberKind) parse(n *yaml.Node) (float64, error) {
	s, err := text(n, "a number")
	if err != nil {
		return 0, err
	}
	switch n.ShortTag() {
	case "!!int":
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, errAt(n, "number %s is out of range", s)
		}
		return float64(i), nil
	case "!!float":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, errAt(n, "want a finite number, got %s", s)
		}
		return f, nil
	}
	return 0, errAt(n, "want a number, got %s", kindName(n))
}

type durationKind struct{}

func (durationKind) parse(n *yaml.Node) (time.Duration, error) {
	s, err := text(n, "a duration such as 30s")
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
			return 0, errAt(n, "duration %s has no unit; write for example %ss or %sms", describe(s), s, s)
		}
		return 0, errAt(n, "invalid duration %s: want a Go duration such as 500ms, 30s, 2m or 1h30m", describe(s))
	}
	return d, nil
}

type sizeKind struct{}

func (sizeKind) parse(n *yaml.Node) (int64, error) {
	s, err := text(n, "a size such as 1MiB")
	if err != nil {
		return 0, err
	}
	if n.ShortTag() == "!!int" {
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, errAt(n, "size %s is out of range", s)
		}
		return v, nil
	}
	v, err := ParseByteSize(s)
	if err != nil {
		return 0, errAt(n, "%v", err)
	}
	return v, nil
}

// intRange gives the bounds of an intIn, inclusive.
type intRange interface {
	limits() (lo, hi int64)
}

type intKind[R intRange] struct{}

func (intKind[R]) parse(n *yaml.Node) (int, error) {
	s, err := text(n, "a whole number")
	if err != nil {
		return 0, err
	}
	if n.ShortTag() != "!!int" {
		return 0, errAt(n, "want a whole number, got %s", kindName(n))
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0, errAt(n, "number %s is out of range", s)
	}
	var r R
	if lo, hi := r.limits(); v < lo || v > hi {
		return 0, errAt(n, "must be between %d and %d, got %d", lo, hi, v)
	}
	return int(v), nil
}

// Bounds of the whole numbers of the file.
type (
	versionRange   struct{}
	retriesRange   struct{}
	redirectsRange struct{}
	statusRange    struct{}
	portRange      struct{}
	burstRange     struct{}
	minCallsRange  struct{}
	streamsRange   struct{}
)

func (versionRange) limits() (int64, int64)   { return 0, 1 << 31 }
func (retriesRange) limits() (int64, int64)   { return 0, engine.MaxRetriesLimit }
func (redirectsRange) limits() (int64, int64) { return 0, MaxRedirectsLimit }
func (statusRange) limits() (int64, int64)    { return 100, 599 }
func (portRange) limits() (int64, int64)      { return 1, 65535 }
func (burstRange) limits() (int64, int64)     { return 1, store.MaxPaceBurst }
func (minCallsRange) limits() (int64, int64)  { return 1, MaxBreakerMinCalls }
func (streamsRange) limits() (int64, int64)   { return 1, engine.MaxStreamConcurrent }

type prefixKind struct{}

func (prefixKind) parse(n *yaml.Node) (netip.Prefix, error) {
	s, err := text(n, "a string")
	if err != nil {
		return netip.Prefix{}, err
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, errAt(n, "%s is not a CIDR (10.20.0.0/16, fd00::/8) or an IP address", describe(s))
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errAt(n, "%s is not a valid CIDR: %v", describe(s), errors.Unwrap(err))
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, errAt(n, "%s has bits set beyond the /%d prefix; did you mean %s?", describe(s), p.Bits(), m)
	}
	return p, nil
}

type hostPatternKind struct{}

func (hostPatternKind) parse(n *yaml.Node) (string, error) {
	s, err := text(n, "a string")
	if err != nil {
		return "", err
	}
	if _, err := egress.NewGuard(egress.AllowHosts(s)); err != nil {
		return "", errAt(n, "%s is not a host name or *.suffix pattern", describe(s))
	}
	return strings.ToLower(s), nil
}

// headerName parses a header name; emptyMsg is the problem with an empty
// one, or "" when empty is allowed.
func headerName(n *yaml.Node, emptyMsg string) (string, error) {
	s, err := text(n, "a string")
	switch {
	case err != nil:
		return "", err
	case s == "" && emptyMsg == "":
		return "", nil
	case s == "":
		return "", errAt(n, "%s", emptyMsg)
	case !httpguts.ValidHeaderFieldName(s):
		return "", errAt(n, "%s is not a valid header name", describe(s))
	}
	return s, nil
}

type headerKind struct{}

func (headerKind) parse(n *yaml.Node) (string, error) {
	return headerName(n, `"" is not a valid header name`)
}

type idempotencyHeaderKind struct{}

func (idempotencyHeaderKind) parse(n *yaml.Node) (string, error) {
	return headerName(n, "must not be empty (the default is "+engine.DefaultIdempotencyKey+")")
}

type attemptHeaderKind struct{}

func (attemptHeaderKind) parse(n *yaml.Node) (string, error) { return headerName(n, "") }

type jitterKind struct{}

func (jitterKind) parse(n *yaml.Node) (engine.JitterMode, error) {
	s, err := text(n, "a string")
	if err != nil {
		return 0, err
	}
	m, err := engine.ParseJitterMode(s)
	if err != nil || s == "" {
		return 0, errAt(n, "unknown jitter mode %s (want full, equal or none)", describe(s))
	}
	return m, nil
}

type readerPositionKind struct{}

func (readerPositionKind) parse(n *yaml.Node) (bool, error) {
	s, err := text(n, "a string")
	if err != nil {
		return false, err
	}
	if s != "before" && s != "after" {
		return false, errAt(n, "want before or after, got %s", describe(s))
	}
	return s == "after", nil
}

type apiKeyHashKind struct{}

// parse decodes a hex SHA-256 digest. Its messages never repeat the value,
// which may be a plain key pasted by mistake.
func (apiKeyHashKind) parse(n *yaml.Node) ([32]byte, error) {
	var h [32]byte
	s, err := text(n, "a SHA-256 hash (64 hex digits)")
	if err != nil {
		return h, err
	}
	const hint = "store the hash of the key, never the key: printf %s \"$KEY\" | sha256sum"
	if strings.HasSuffix(s, "-") && len(strings.TrimSpace(strings.TrimSuffix(s, "-"))) == 64 {
		return h, errAt(n, "remove the trailing \"  -\" that sha256sum prints after the hash")
	}
	if len(s) != 64 {
		return h, errAt(n, "want a SHA-256 hash of 64 hex digits, got %d characters; %s", len(s), hint)
	}
	if !decodeHex32(&h, s) {
		return h, errAt(n, "want a SHA-256 hash of 64 hex digits (0-9, a-f), got other characters; %s", hint)
	}
	return h, nil
}

// decodeHex32 decodes 64 hex digits (either case) into h without
// allocating.
func decodeHex32(h *[32]byte, s string) bool {
	for i := range h {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		h[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

type identityKind struct{}

func (identityKind) parse(n *yaml.Node) (string, error) {
	s, err := text(n, "a string")
	if err != nil {
		return "", err
	}
	if msg := checkIdentity(s); msg != "" {
		return "", errAt(n, "%s", msg)
	}
	return s, nil
}
