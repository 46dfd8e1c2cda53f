package server

import (
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/providers"
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
// values free of CR, LF and NUL.
func checkHeaders(v *violations, field string, hs []*rbv1.HttpHeader) {
	if len(hs) > MaxHeaders {
		v.add(field, "too many headers: %d (at most %d)", len(hs), MaxHeaders)
		return
	}
	total := 0
	for i, h := range hs {
		total += len(h.GetName()) + len(h.GetValue())
		if !httpguts.ValidHeaderFieldName(h.GetName()) {
			v.add(fieldIndex(field, i, "name"), "%q is not a valid header name (RFC 9110 token)", truncate(h.GetName()))
		}
		if strings.ContainsAny(h.GetValue(), "\r\n\x00") {
			v.add(fieldIndex(field, i, "value"), "header value must not contain CR, LF or NUL")
		}
	}
	if total > MaxHeaderBytes {
		v.add(field, "headers too large: %d bytes (at most %d)", total, MaxHeaderBytes)
	}
}

func checkProvider(v *violations, p string) {
	if _, ok := providers.Lookup(p); !ok {
		v.add("provider", "unknown provider %q (known: %s)", truncate(p), strings.Join(providers.Names(), ", "))
	}
}

func fieldIndex(list string, i int, field string) string {
	return fmt.Sprintf("%s[%d].%s", list, i, field)
}

func checkMethod(v *violations, field, m string) {
	if m != "" && !httpguts.ValidHeaderFieldName(m) {
		v.add(field, "%q is not a valid HTTP method", truncate(m))
	}
}

// truncate keeps error messages short and printable.
func truncate(s string) string {
	const n = 64
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
