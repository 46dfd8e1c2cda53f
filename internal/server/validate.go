package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Input limits enforced on every RPC.
const (
	// MaxHeaders is the most header lines accepted in one list.
	MaxHeaders = 256
	// MaxHeaderBytes is the most bytes of names and values in one list.
	MaxHeaderBytes = 64 << 10
	// MaxClassifyBody is the most body bytes ClassifyResponse accepts.
	MaxClassifyBody = 64 << 10
	// MaxURLLength is the longest URL accepted.
	MaxURLLength = 8 << 10
)

// violations collects field violations and turns them into one
// INVALID_ARGUMENT status with a google.rpc.BadRequest detail.
type violations struct {
	list []*errdetails.BadRequest_FieldViolation
}

func (v *violations) add(field, format string, args ...any) {
	v.list = append(v.list, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

func (v *violations) err() error {
	if len(v.list) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(v.list))
	for _, fv := range v.list {
		msgs = append(msgs, fv.GetField()+": "+fv.GetDescription())
	}
	st := status.New(codes.InvalidArgument, "invalid request: "+strings.Join(msgs, "; "))
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: v.list}); err == nil {
		st = d
	}
	return st.Err()
}

// checkHeaders validates a header list: count, total size, token names and
// values free of control characters (RFC 9110 field values: no CTL but
// HTAB, no DEL). Messages never repeat a name or a value: a malformed line
// such as "Authorization: Bearer x" sent as a name would put a secret in
// the log.
func checkHeaders(v *violations, field string, hs []*rbv1.HttpHeader) {
	if len(hs) > MaxHeaders {
		v.add(field, "too many headers: %d (at most %d)", len(hs), MaxHeaders)
		return
	}
	total := 0
	for i, h := range hs {
		total += len(h.GetName()) + len(h.GetValue())
		if name := h.GetName(); !httpguts.ValidHeaderFieldName(name) {
			v.add(fieldIndex(field, i, "name"), "not a valid header name (RFC 9110 token): %s", describeBadToken(name))
		}
		if at, c, bad := controlChar(h.GetValue()); bad {
			v.add(fieldIndex(field, i, "value"), "header value must not contain control characters (byte 0x%02x at offset %d)", c, at)
		}
	}
	if total > MaxHeaderBytes {
		v.add(field, "headers too large: %d bytes (at most %d)", total, MaxHeaderBytes)
	}
}

// describeBadToken says what makes s an invalid token without repeating it.
func describeBadToken(s string) string {
	if s == "" {
		return "empty"
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) || s[i] >= 0x80 {
			return fmt.Sprintf("byte %d of %d is not a token character", i, len(s))
		}
	}
	return fmt.Sprintf("%d bytes", len(s))
}

// controlChar returns the first control character of a field value (a CTL
// other than HTAB, or DEL) and its offset.
func controlChar(s string) (int, byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return i, c, true
		}
	}
	return 0, 0, false
}

// checkProvider checks a request's provider override against the catalog
// of the caller's policy (its tenant's: the built-in providers, the
// configuration file's and the tenant's own), adding a violation for a
// name it does not hold. An empty name is no override.
func checkProvider(v *violations, pol *tenant.Policy, name string) {
	if name == "" {
		return
	}
	if cat := pol.ProviderCatalog(); !cat.Has(name) {
		v.add("provider", "unknown provider %s (known: %s)", quoteName(name), strings.Join(cat.Names(), ", "))
	}
}

// quoteName repeats a caller-given name in a message only when it looks
// like a name (short, printable, no spaces); otherwise it says what it is.
func quoteName(s string) string {
	if len(s) == 0 || len(s) > 64 {
		return fmt.Sprintf("(%d bytes)", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Sprintf("(%d bytes)", len(s))
		}
	}
	return strconv.Quote(s)
}

func fieldIndex(list string, i int, field string) string {
	return fmt.Sprintf("%s[%d].%s", list, i, field)
}

func checkMethod(v *violations, field, m string) {
	if m != "" && !httpguts.ValidHeaderFieldName(m) {
		v.add(field, "not a valid HTTP method (RFC 9110 token): %s", describeBadToken(m))
	}
}

// checkCredentialHeaders refuses the caller's headers that the policy's
// broker-held credential sets (names compared canonically), naming the
// header and the credential, never a value; a credential with overwrite
// replaces them instead (nothing is refused).
func checkCredentialHeaders(v *violations, cred credential.Credential, hs []*rbv1.HttpHeader) {
	if cred == nil || cred.Overwrite() {
		return
	}
	sets := cred.Headers()
	for i, h := range hs {
		name := http.CanonicalHeaderKey(h.GetName())
		if slices.Contains(sets, name) {
			v.add(fieldIndex("request.headers", i, "name"),
				"%s is set by the policy's broker-held credential %s and may not be sent (or configure the credential with overwrite: true)",
				name, quoteName(cred.Name()))
		}
	}
}
