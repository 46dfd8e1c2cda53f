package providers

import (
	"testing"
	"time"
)

func TestParseDiscordBody(t *testing.T) {
	checkDurations(t, "ParseDiscordBody", func(s string) (time.Duration, bool) { return ParseDiscordBody([]byte(s)) }, []durationCase{
		{`{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}`, 64570 * time.Millisecond, true},
		{`{"retry_after": 2}`, 2 * time.Second, true},
		{`{"retry_after": 1.234}`, 1234 * time.Millisecond, true},
		{`{"retry_after": 0}`, 0, true},
		{`{"retry_after": 1e3}`, 1000 * time.Second, true},
		{`{"retry_after": 1.5E-3}`, 1500 * time.Microsecond, true},
		{` { "retry_after" : 3 } `, 3 * time.Second, true},
		{`{"retry_after": -1}`, 0, false},
		{`{"retry_after": -0}`, 0, false},
		{`{"retry_after": "2"}`, 0, false},
		{`{"retry_after": null}`, 0, false},
		{`{"retry_after": true}`, 0, false},
		{`{"retry_after": NaN}`, 0, false},
		{`{"retry_after": 1e400}`, 0, false},
		{`{"retry_after": 9.3e9}`, 0, false},
		{`{"retry_after": 99999999999999999999}`, 0, false},
		{`{"Retry_After": 2}`, 0, false},
		{`{"retry_after": 64.5`, 0, false}, // truncated
		{`{"retry_after": 2} trailing`, 0, false},
		{`[{"retry_after": 2}]`, 0, false},
		{`null`, 0, false},
		{`{}`, 0, false},
		{`rate limited`, 0, false},
		{``, 0, false},
	})
}

func TestParseGoogleRetryInfo(t *testing.T) {
	checkDurations(t, "ParseGoogleRetryInfo", func(s string) (time.Duration, bool) { return ParseGoogleRetryInfo([]byte(s)) }, []durationCase{
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`, 37 * time.Second, true},
		{`{"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED", "details": [
			{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
			{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}`, 1500 * time.Millisecond, true},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0s"}]}}`, 0, true},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-1s"}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37"}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":37}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo"}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`, 0, false}, // ambiguous
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","retryDelay":"37s"}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","RetryDelay":"37s"}]}}`, 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]`, 0, false}, // truncated
		{`{"error":{"details":{}}}`, 0, false},
		{`{"error":{"details":[null, 5, "x"]}}`, 0, false},
		{`{"error":null}`, 0, false},
		{`{"retryDelay":"37s"}`, 0, false},
		{`<html>429</html>`, 0, false},
		{``, 0, false},
	})
}
