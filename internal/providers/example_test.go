package providers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/retrybroker/retrybroker/internal/providers"
)

func ExampleLookup() {
	reader, ok := providers.Lookup("github")
	if !ok {
		panic("no github reader")
	}
	h := http.Header{}
	h.Add("x-ratelimit-remaining", "0")
	h.Add("x-ratelimit-reset", "1796126445") // 2026-12-01T12:00:45Z
	got := reader.Read(&providers.Response{
		Status: http.StatusForbidden,
		Header: h,
		Now:    time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	})
	fmt.Println(got.HasHint, got.Hint.Delay, got.Hint.Source)
	fmt.Println(got.HasQuota, got.Quota.Remaining, got.Quota.Reset.UTC().Format(time.RFC3339))
	// Output:
	// true 45s x-ratelimit-reset
	// true 0 2026-12-01T12:00:45Z
}

func ExampleChain() {
	custom, err := providers.NewCustomReader("X-Backoff-Ms", providers.FormatMilliseconds)
	if err != nil {
		panic(err)
	}
	provider, _ := providers.Lookup("retry-after")
	reader := providers.Chain("my-policy", custom, provider)

	h := http.Header{}
	h.Add("Retry-After", "5")
	h.Add("X-Backoff-Ms", "750")
	got := reader.Read(&providers.Response{Status: http.StatusServiceUnavailable, Header: h})
	fmt.Println(got.Hint.Delay, got.Hint.Source)
	// Output: 750ms x-backoff-ms
}

func ExampleHostMap_ProviderFor() {
	m, err := providers.NewHostMap(map[string]string{"ghe.example.com": "github"})
	if err != nil {
		panic(err)
	}
	for _, host := range []string{"api.github.com", "ghe.example.com:443", "foo.atlassian.net", "atlassian.net"} {
		name, ok := m.ProviderFor(host)
		fmt.Printf("%s: %q %v\n", host, name, ok)
	}
	// Output:
	// api.github.com: "github" true
	// ghe.example.com:443: "github" true
	// foo.atlassian.net: "jira" true
	// atlassian.net: "" false
}
