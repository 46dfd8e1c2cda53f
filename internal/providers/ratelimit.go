package providers

import (
	"strings"
	"time"
	"unicode/utf8"
)

// RateLimitItem is one member of an IETF RateLimit field
// (draft-ietf-httpapi-ratelimit-headers): a quota policy name with its
// remaining quota and reset time.
type RateLimitItem struct {
	// Name is the policy name (the item's string or token value).
	Name string
	// Remaining is the "r" parameter: quota units left. Valid only when
	// HasRemaining is true.
	Remaining    int64
	HasRemaining bool
	// Reset is the "t" parameter: seconds until the quota resets. Valid only
	// when HasReset is true.
	Reset    time.Duration
	HasReset bool
}

// ParseRateLimit parses the field lines of an IETF RateLimit field, for
// example `"default";r=0;t=30, "daily";r=100;t=3600`. The lines are combined
// with ", " as RFC 9110 does for list fields, and the result is parsed
// strictly as an RFC 9651 structured-field List. Every member must be an item
// whose value is a string or a token; its "r" and "t" parameters, when
// present, must be non-negative integers, and "t" must fit a time.Duration in
// seconds. Other parameters may hold any bare item and are ignored; when a
// parameter repeats, the last one wins (RFC 9651). Any syntax or type error
// makes the whole field invalid, and ParseRateLimit reports false.
func ParseRateLimit(lines []string) ([]RateLimitItem, bool) {
	if len(lines) == 0 {
		return nil, true
	}
	input := rateLimitInput(lines)
	p := sfParser{s: input}
	var items []RateLimitItem
	if !p.rateLimitList(func(it RateLimitItem) { items = append(items, it) }) {
		return nil, false
	}
	return items, true
}

// RateLimitPolicy is one member of an IETF RateLimit-Policy field
// (draft-ietf-httpapi-ratelimit-headers-09 and later): a named quota policy.
type RateLimitPolicy struct {
	// Name is the policy name, matching a RateLimit item's name.
	Name string
	// Quota is the "q" parameter: the quota units the policy allocates.
	Quota int64
	// Unit is the "qu" parameter (for example "request", "content-bytes",
	// "concurrency"); empty when absent, which means requests.
	Unit string
	// Window is the "w" parameter, in seconds; valid when HasWindow.
	Window    time.Duration
	HasWindow bool
}

// CountsRequests reports whether the policy's quota counts requests: its
// unit is absent, "request" or "requests".
func (p RateLimitPolicy) CountsRequests() bool {
	return p.Unit == "" || p.Unit == "request" || p.Unit == "requests"
}

// ParseRateLimitPolicy parses the field lines of an IETF RateLimit-Policy
// field, for example `"default";q=100;w=60;qu="request"`, with the same
// structured-field rules as ParseRateLimit. Each member must be a string or
// token item with a non-negative integer "q"; "w", when present, must be a
// non-negative integer of seconds that fits a time.Duration, and "qu" a
// string or token. Other parameters are ignored. Any error makes the whole
// field invalid (false). The older drafts' form ("10;w=1", integer items)
// is not a policy list and is reported invalid.
func ParseRateLimitPolicy(lines []string) ([]RateLimitPolicy, bool) {
	if len(lines) == 0 {
		return nil, true
	}
	p := sfParser{s: rateLimitInput(lines)}
	var out []RateLimitPolicy
	ok := p.list(func() bool {
		v, ok := p.bareItem()
		if !ok || (v.kind != sfString && v.kind != sfToken) {
			return false
		}
		pol := RateLimitPolicy{Name: v.str}
		var q, w, qu *sfItem
		var qv, wv, quv sfItem
		for p.peek() == ';' {
			p.pos++
			p.skipSP()
			key, ok := p.key()
			if !ok {
				return false
			}
			val := sfItem{kind: sfBoolean, num: 1}
			if p.peek() == '=' {
				p.pos++
				if val, ok = p.bareItem(); !ok {
					return false
				}
			}
			switch key {
			case "q":
				qv, q = val, &qv
			case "w":
				wv, w = val, &wv
			case "qu":
				quv, qu = val, &quv
			}
		}
		if q == nil || q.kind != sfInteger || q.num < 0 {
			return false
		}
		pol.Quota = q.num
		if w != nil {
			if w.kind != sfInteger || w.num < 0 || w.num > maxDelaySeconds {
				return false
			}
			pol.Window, pol.HasWindow = time.Duration(w.num)*time.Second, true
		}
		if qu != nil {
			if qu.kind != sfString && qu.kind != sfToken {
				return false
			}
			pol.Unit = qu.str
		}
		out = append(out, pol)
		return true
	})
	if !ok {
		return nil, false
	}
	return out, true
}

// list parses a List field whose members are parsed by member, which
// reports false on an error.
func (p *sfParser) list(member func() bool) bool {
	p.s = trimOWS(p.s)
	for !p.eof() {
		if p.peek() == '(' || !member() {
			return false
		}
		p.skipOWS()
		if p.eof() {
			return true
		}
		if p.peek() != ',' {
			return false
		}
		p.pos++
		p.skipOWS()
		if p.eof() {
			return false
		}
	}
	return true
}

// rateLimitInput combines RateLimit field lines as RFC 9110 does for lists.
func rateLimitInput(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.Join(lines, ", ")
}

// RateLimitDelay returns the delay an IETF RateLimit field asks for: the
// largest reset ("t", in seconds) among items whose remaining quota ("r") is
// zero. It reports false when the field is invalid or no item is exhausted.
func RateLimitDelay(lines []string) (time.Duration, bool) {
	if len(lines) == 0 {
		return 0, false
	}
	var best time.Duration
	found := false
	p := sfParser{s: rateLimitInput(lines)}
	ok := p.rateLimitList(func(it RateLimitItem) {
		if it.HasRemaining && it.Remaining == 0 && it.HasReset && (!found || it.Reset > best) {
			best, found = it.Reset, true
		}
	})
	if !ok || !found {
		return 0, false
	}
	return best, true
}

// sfParser is a strict parser for the subset of RFC 9651 structured fields a
// List needs. Bare items of every RFC 9651 type are recognised so that a
// well-formed field never fails for an unexpected parameter.
type sfParser struct {
	s   string
	pos int
}

// sfKind is the type of a parsed bare item.
type sfKind int8

const (
	sfInteger sfKind = iota
	sfDecimal
	sfString
	sfToken
	sfBinary
	sfBoolean
	sfDate
	sfDisplayString
)

// sfItem is a parsed bare item. str holds string, token and the raw text of
// other kinds; num holds integers and dates.
type sfItem struct {
	kind sfKind
	str  string
	num  int64
}

func (p *sfParser) eof() bool { return p.pos >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.pos]
}

func (p *sfParser) skipSP() {
	for !p.eof() && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

// rateLimitList parses a whole List field (RFC 9651 section 4.2 and 4.2.1)
// and passes each RateLimit item to visit, in order. It reports false if the
// field is invalid, possibly after visiting some items.
func (p *sfParser) rateLimitList(visit func(RateLimitItem)) bool {
	// Leading SP is discarded; trailing SP is discarded too. Field values
	// from HTTP have no surrounding tabs, but be lenient with OWS here as
	// the engine may pass untrimmed values.
	p.s = trimOWS(p.s)
	for !p.eof() {
		if p.peek() == '(' {
			// An inner list is well-formed syntax but not a RateLimit item.
			return false
		}
		it, ok := p.rateLimitItem()
		if !ok {
			return false
		}
		visit(it)
		p.skipOWS()
		if p.eof() {
			return true
		}
		if p.peek() != ',' {
			return false
		}
		p.pos++
		p.skipOWS()
		if p.eof() {
			// A trailing comma is an error.
			return false
		}
	}
	return true
}

// rateLimitItem parses one Item with its parameters.
func (p *sfParser) rateLimitItem() (RateLimitItem, bool) {
	var it RateLimitItem
	v, ok := p.bareItem()
	if !ok || (v.kind != sfString && v.kind != sfToken) {
		return it, false
	}
	it.Name = v.str
	// Parameters repeat with the last one winning (RFC 9651 section 4.2.3.2),
	// so r and t are checked only once all are read.
	var r, t *sfItem
	var rv, tv sfItem
	for p.peek() == ';' {
		p.pos++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return it, false
		}
		val := sfItem{kind: sfBoolean, num: 1}
		if p.peek() == '=' {
			p.pos++
			if val, ok = p.bareItem(); !ok {
				return it, false
			}
		}
		switch key {
		case "r":
			rv, r = val, &rv
		case "t":
			tv, t = val, &tv
		}
	}
	if r != nil {
		if r.kind != sfInteger || r.num < 0 {
			return it, false
		}
		it.Remaining, it.HasRemaining = r.num, true
	}
	if t != nil {
		if t.kind != sfInteger || t.num < 0 || t.num > maxDelaySeconds {
			return it, false
		}
		it.Reset, it.HasReset = time.Duration(t.num)*time.Second, true
	}
	return it, true
}

// key parses an RFC 9651 key: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
func (p *sfParser) key() (string, bool) {
	start := p.pos
	c := p.peek()
	if !(c >= 'a' && c <= 'z') && c != '*' {
		return "", false
	}
	p.pos++
	for !p.eof() {
		c := p.s[p.pos]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '*' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos], true
}

// bareItem parses one RFC 9651 bare item.
func (p *sfParser) bareItem() (sfItem, bool) {
	c := p.peek()
	switch {
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		return p.token()
	case c == ':':
		return p.binary()
	case c == '?':
		return p.boolean()
	case c == '@':
		p.pos++
		v, ok := p.number()
		if !ok || v.kind != sfInteger {
			return sfItem{}, false
		}
		v.kind = sfDate
		return v, true
	case c == '%':
		return p.displayString()
	}
	return sfItem{}, false
}

// number parses an sf-integer (at most 15 digits) or sf-decimal (at most 12
// integer digits and 1 to 3 fraction digits).
func (p *sfParser) number() (sfItem, bool) {
	start := p.pos
	neg := false
	if p.peek() == '-' {
		neg = true
		p.pos++
	}
	digits := 0
	var n int64
	for !p.eof() && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		n = n*10 + int64(p.s[p.pos]-'0')
		digits++
		p.pos++
		if digits > 15 {
			return sfItem{}, false
		}
	}
	if digits == 0 {
		return sfItem{}, false
	}
	if p.peek() != '.' {
		if neg {
			n = -n
		}
		return sfItem{kind: sfInteger, num: n, str: p.s[start:p.pos]}, true
	}
	if digits > 12 {
		return sfItem{}, false
	}
	p.pos++
	frac := 0
	for !p.eof() && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		frac++
		p.pos++
	}
	if frac < 1 || frac > 3 {
		return sfItem{}, false
	}
	return sfItem{kind: sfDecimal, str: p.s[start:p.pos]}, true
}

// str parses an sf-string: printable ASCII in double quotes with \" and \\
// as the only escapes.
func (p *sfParser) str() (sfItem, bool) {
	p.pos++ // opening quote
	start := p.pos
	escaped := false
	for !p.eof() {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == '\\':
			if p.eof() {
				return sfItem{}, false
			}
			if n := p.s[p.pos]; n != '"' && n != '\\' {
				return sfItem{}, false
			}
			p.pos++
			escaped = true
		case c == '"':
			v := p.s[start : p.pos-1]
			if escaped {
				v = unescapeSF(v)
			}
			return sfItem{kind: sfString, str: v}, true
		case c < 0x20 || c > 0x7e:
			return sfItem{}, false
		}
	}
	return sfItem{}, false
}

// unescapeSF removes the backslashes of a validated sf-string body.
func unescapeSF(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// token parses an sf-token: ( ALPHA / "*" ) *( tchar / ":" / "/" ).
func (p *sfParser) token() (sfItem, bool) {
	start := p.pos
	p.pos++
	for !p.eof() {
		c := p.s[p.pos]
		if isTchar(c) || c == ':' || c == '/' {
			p.pos++
			continue
		}
		break
	}
	return sfItem{kind: sfToken, str: p.s[start:p.pos]}, true
}

// binary parses an sf-binary: ":" *(base64) ":".
func (p *sfParser) binary() (sfItem, bool) {
	p.pos++
	start := p.pos
	for !p.eof() {
		c := p.s[p.pos]
		if c == ':' {
			v := p.s[start:p.pos]
			p.pos++
			if !validBase64(v) {
				return sfItem{}, false
			}
			return sfItem{kind: sfBinary, str: v}, true
		}
		if !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '=') {
			return sfItem{}, false
		}
		p.pos++
	}
	return sfItem{}, false
}

// validBase64 reports whether s, made of base64 alphabet characters and
// '=', decodes as RFC 9651 section 4.2.7 requires. Padding may be omitted
// (parsers SHOULD NOT fail on its absence), but '=' may appear only at the
// end, at most twice, and only where it completes a 4-character group:
// ":a=bc:" or ":abcde===:" are malformed, which makes the whole field
// invalid. Non-zero pad bits are accepted, as RFC 9651 recommends.
func validBase64(s string) bool {
	body := strings.TrimRight(s, "=")
	pad := len(s) - len(body)
	if strings.IndexByte(body, '=') >= 0 || pad > 2 {
		return false
	}
	switch len(body) % 4 {
	case 1:
		return false // no base64 group ends after one character
	case 0:
		return pad == 0
	case 2:
		return pad == 0 || pad == 2
	default: // 3
		return pad == 0 || pad == 1
	}
}

// boolean parses an sf-boolean: "?0" or "?1".
func (p *sfParser) boolean() (sfItem, bool) {
	p.pos++
	switch p.peek() {
	case '0':
		p.pos++
		return sfItem{kind: sfBoolean, num: 0}, true
	case '1':
		p.pos++
		return sfItem{kind: sfBoolean, num: 1}, true
	}
	return sfItem{}, false
}

// displayString parses an sf-displaystring: %"..." with lower-case %xx
// escapes that decode to valid UTF-8.
func (p *sfParser) displayString() (sfItem, bool) {
	p.pos++
	if p.peek() != '"' {
		return sfItem{}, false
	}
	p.pos++
	var buf []byte
	for !p.eof() {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == '%':
			if p.pos+2 > len(p.s) {
				return sfItem{}, false
			}
			hi, ok1 := lowerHex(p.s[p.pos])
			lo, ok2 := lowerHex(p.s[p.pos+1])
			if !ok1 || !ok2 {
				return sfItem{}, false
			}
			buf = append(buf, hi<<4|lo)
			p.pos += 2
		case c == '"':
			if !utf8.Valid(buf) {
				return sfItem{}, false
			}
			return sfItem{kind: sfDisplayString, str: string(buf)}, true
		case c < 0x20 || c > 0x7e:
			return sfItem{}, false
		default:
			buf = append(buf, c)
		}
	}
	return sfItem{}, false
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// isTchar reports whether c is an RFC 9110 tchar.
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
