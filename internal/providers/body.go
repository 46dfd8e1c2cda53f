package providers

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// ParseDiscordBody reads Discord's retry_after field, in seconds, from a JSON
// object body such as {"message": "You are being rate limited.",
// "retry_after": 64.57, "global": false}. The field must be a JSON number
// (not a string), non-negative; a fraction is exact to the nanosecond and an
// exponent is allowed as JSON permits. The key is matched exactly. A body that
// is not a complete JSON object (for example one truncated by the caller), a
// missing field, or a value that does not fit a time.Duration gives false.
func ParseDiscordBody(body []byte) (time.Duration, bool) {
	if len(body) == 0 {
		return 0, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return 0, false
	}
	raw, ok := obj["retry_after"]
	if !ok {
		return 0, false
	}
	return parseJSONSeconds(raw)
}

// parseJSONSeconds converts a JSON number of seconds to a duration. It
// rejects negative numbers and anything that is not a number.
func parseJSONSeconds(raw json.RawMessage) (time.Duration, bool) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false // null, strings, booleans, objects, negatives
	}
	s := string(raw)
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			// An exponent: only the float form is exact enough to read it.
			f, err := strconv.ParseFloat(s, 64)
			ns := f * float64(time.Second)
			if err != nil || math.IsNaN(f) || f < 0 || ns >= math.MaxInt64 {
				return 0, false
			}
			return time.Duration(ns), true
		}
	}
	return parseDecimalSeconds(s)
}

// googleRetryInfoType is the @type of a google.rpc.RetryInfo detail.
const googleRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// ParseGoogleRetryInfo reads the retryDelay of a google.rpc.RetryInfo detail
// from a Google JSON error body:
//
//	{"error": {"code": 429, "details": [
//	  {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
//
// retryDelay is a protobuf Duration in JSON form, parsed by
// ParseProtoDuration. Keys are matched exactly. Two or more RetryInfo
// details are ambiguous and give false, as do a truncated or non-JSON body,
// a missing detail and an invalid delay.
func ParseGoogleRetryInfo(body []byte) (time.Duration, bool) {
	if len(body) == 0 {
		return 0, false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return 0, false
	}
	var errObj map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &errObj); err != nil {
		return 0, false
	}
	var details []map[string]json.RawMessage
	if err := json.Unmarshal(errObj["details"], &details); err != nil {
		return 0, false
	}
	var delay string
	found := false
	for _, d := range details {
		var typ string
		if err := json.Unmarshal(d["@type"], &typ); err != nil || typ != googleRetryInfoType {
			continue
		}
		if found {
			return 0, false
		}
		found = true
		if err := json.Unmarshal(d["retryDelay"], &delay); err != nil {
			return 0, false
		}
	}
	if !found {
		return 0, false
	}
	return ParseProtoDuration(delay)
}
