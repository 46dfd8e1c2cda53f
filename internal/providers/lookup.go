package providers

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/net/http/httpguts"
)

// Lookup returns the built-in reader with the given name: "retry-after"
// (the default), "azure", "aws", "github", "jira", "openai", "anthropic",
// "discord", "gitlab", "shopify", "x", "ietf", "google", "stripe", or "none",
// which reads nothing. Names are case-sensitive. The readers are the entries
// of the built-in catalog (Builtin), shared and safe for concurrent use;
// each is an *Entry.
func Lookup(name string) (HintReader, bool) {
	e, ok := Builtin().Lookup(name)
	if !ok {
		return nil, false
	}
	return e, true
}

// Names returns the names of the built-in readers, sorted.
func Names() []string { return Builtin().Names() }

// Format is how a custom reader's header encodes a delay.
type Format string

// Formats of custom readers.
const (
	// FormatSeconds is a delay in whole seconds (ParseDelaySeconds).
	FormatSeconds Format = "seconds"
	// FormatMilliseconds is a delay in whole milliseconds (ParseMilliseconds).
	FormatMilliseconds Format = "milliseconds"
	// FormatUnixSeconds is an absolute time in seconds since the Unix epoch
	// (ParseUnixSeconds); a time in the past gives a delay of 0.
	FormatUnixSeconds Format = "unix_seconds"
	// FormatRetryAfter is delay-seconds or an HTTP-date, as in Retry-After
	// (ParseRetryAfter).
	FormatRetryAfter Format = "retry_after"
	// FormatISO8601 is an absolute ISO 8601 time (ParseISO8601); a time in
	// the past gives a delay of 0.
	FormatISO8601 Format = "iso8601"
)

// ErrInvalidHeaderName is returned by NewCustomReader for a header name that
// is not an RFC 9110 token.
var ErrInvalidHeaderName = errors.New("providers: header name is not an RFC 9110 token")

// ErrUnknownFormat is returned by NewCustomReader for an unknown Format.
var ErrUnknownFormat = errors.New("providers: unknown hint format")

// customReader reads one header in one format.
type customReader struct {
	name   string
	f      field
	format valueFormat
}

// NewCustomReader returns a reader for one header of a policy's own choosing,
// in the given format. The header name is matched case-insensitively and must
// be an RFC 9110 token; the hint's Source is the name in lower case. The
// reader's Name is "custom:" followed by that lower-case name. Like every
// reader, it treats a header that appears twice or holds a list as invalid.
func NewCustomReader(header string, format Format) (HintReader, error) {
	if !httpguts.ValidHeaderFieldName(header) {
		return nil, fmt.Errorf("custom reader %q: %w", header, ErrInvalidHeaderName)
	}
	var vf valueFormat
	switch format {
	case FormatSeconds:
		vf = formatSeconds
	case FormatMilliseconds:
		vf = formatMilliseconds
	case FormatUnixSeconds:
		vf = formatUnixSeconds
	case FormatRetryAfter:
		vf = formatRetryAfter
	case FormatISO8601:
		vf = formatISO8601
	default:
		return nil, fmt.Errorf("custom reader %q: format %q: %w (want seconds, milliseconds, unix_seconds, retry_after or iso8601)",
			header, string(format), ErrUnknownFormat)
	}
	f := newField(header)
	return &customReader{name: "custom:" + f.source, f: f, format: vf}, nil
}

// Name returns "custom:" and the lower-case header name.
func (c *customReader) Name() string { return c.name }

// Read returns the hint in the reader's header, if valid.
func (c *customReader) Read(r *Response) Reading {
	var out Reading
	if r != nil {
		out.Hint, out.HasHint = headerHint(r, c.f, c.format)
	}
	return out
}

// ExtraRetryableStatuses returns nil: custom readers add no statuses.
func (c *customReader) ExtraRetryableStatuses() []int { return nil }

// chainReader tries several readers in order.
type chainReader struct {
	name    string
	readers []HintReader
	extra   []int
}

// Chain returns a reader named name that combines readers, tried in order:
// the first valid hint wins, the verdict is the first that is not
// VerdictNone, the quota is the first found, and the extra retryable
// statuses are the sorted union of all; Rule and Scope are the first
// non-empty, and the chain needs the body when any reader does (it
// implements BodyReader). Nil readers are skipped. Use it to
// put a policy's custom readers before or after its provider's reader.
func Chain(name string, readers ...HintReader) HintReader {
	c := &chainReader{name: name}
	for _, rd := range readers {
		if rd == nil {
			continue
		}
		c.readers = append(c.readers, rd)
		c.extra = append(c.extra, rd.ExtraRetryableStatuses()...)
	}
	slices.Sort(c.extra)
	c.extra = slices.Compact(c.extra)
	if len(c.extra) == 0 {
		c.extra = nil
	}
	return c
}

// Name returns the name given to Chain.
func (c *chainReader) Name() string { return c.name }

// Read combines the readings of the chained readers.
func (c *chainReader) Read(r *Response) Reading {
	var out Reading
	for _, rd := range c.readers {
		got := rd.Read(r)
		if got.HasHint && !out.HasHint {
			out.Hint, out.HasHint = got.Hint, true
		}
		if out.Verdict == VerdictNone {
			out.Verdict = got.Verdict
		}
		if got.HasQuota && !out.HasQuota {
			out.Quota, out.HasQuota = got.Quota, true
		}
		if out.Rule == "" {
			out.Rule = got.Rule
		}
		if out.Scope == "" {
			out.Scope = got.Scope
		}
	}
	return out
}

// NeedsBody reports whether any chained reader reads the body of a
// response with this status.
func (c *chainReader) NeedsBody(status int) bool {
	for _, rd := range c.readers {
		if NeedsBody(rd, status) {
			return true
		}
	}
	return false
}

// ExtraRetryableStatuses returns the union of the chained readers' extra
// statuses, sorted; callers must not modify the slice.
func (c *chainReader) ExtraRetryableStatuses() []int { return c.extra }

// lowerASCII returns s with ASCII upper-case letters lowered, without
// allocating when s has none.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
