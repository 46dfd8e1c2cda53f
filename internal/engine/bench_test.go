package engine_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// benchCases are typical responses, classified in-process by the engine and,
// side by side, by go-retryablehttp's DefaultRetryPolicy + DefaultBackoff.
var benchCases = []struct {
	name   string
	status int
	kv     []string
}{
	{"429-retry-after", 429, []string{"Retry-After", "5", "Content-Type", "application/json"}},
	{"503-backoff", 503, []string{"Content-Type", "text/html"}},
	{"200-success", 200, []string{"Content-Type", "application/json"}},
}

func BenchmarkClassify(b *testing.B) {
	p := mustPolicy(b, nil)
	for _, c := range benchCases {
		r := resp(c.status, c.kv...)
		b.Run("broker/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			in := engine.Input{Method: "GET", Attempt: 1, Response: r}
			for b.Loop() {
				d := p.Decide(&in, nil) // Decide does not modify in
				if d.Action == engine.ActionUnspecified {
					b.Fatal("no decision")
				}
			}
		})
		hr := &http.Response{StatusCode: c.status, Header: r.Header}
		b.Run("retryablehttp/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				retry, _ := retryablehttp.DefaultRetryPolicy(ctx, hr, nil)
				if retry {
					_ = retryablehttp.DefaultBackoff(time.Second, 30*time.Second, 1, hr)
				}
			}
		})
	}
}

// BenchmarkClassifyGitHub classifies a GitHub quota-exhausted 403.
func BenchmarkClassifyGitHub(b *testing.B) {
	p := mustPolicy(b, func(p *engine.Policy) { p.Provider = "github" })
	r := resp(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796126445")
	b.ReportAllocs()
	in := engine.Input{Method: "GET", Attempt: 1, Response: r}
	for b.Loop() {
		_ = p.Decide(&in, nil)
	}
}
