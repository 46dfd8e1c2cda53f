package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TestTenantStreamLimitAcrossPolicies (issue 17, defect 9): one tenant with
// four policies, each with stream.max_concurrent 8, used to hold 32 streams
// at once. With the tenant's own limit of 8, the 9th concurrent stream,
// whatever its policy, is refused with RESOURCE_EXHAUSTED, the status the
// policy's limit uses; a stream that ends frees a slot for any policy.
// Without a tenant limit of its own, the tenant's default is the largest of
// its policies' limits: 8 again.
func TestTenantStreamLimitAcrossPolicies(t *testing.T) {
	t.Run("tenant limit", func(t *testing.T) { testTenantStreamLimit(t, "    stream: {max_concurrent: 8}\n") })
	t.Run("default", func(t *testing.T) { testTenantStreamLimit(t, "") })
}

func testTenantStreamLimit(t *testing.T, tenantStream string) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("open"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { closeOnce(release) })

	const key = "acme-stream-key"
	sum := sha256.Sum256([]byte(key))
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 1\ntenants:\n  - id: acme\n    api_key_sha256: [%q]\n%s    policies:\n", hex.EncodeToString(sum[:]), tenantStream)
	for _, name := range []string{"default", "p1", "p2", "p3"} {
		fmt.Fprintf(&cfg, "      %s: {stream: {max_concurrent: 8}, allow_destinations: [\"127.0.0.1/32\"]}\n", name)
	}
	path := filepath.Join(t.TempDir(), "streams.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "--config", path)
	ctx, cancel := context.WithTimeout(withKey(context.Background(), key), time.Minute)
	defer cancel()
	open := func(policy string) (rbv1.BrokerService_ExecuteStreamClient, error) {
		s, err := p.client.ExecuteStream(ctx, &rbv1.ExecuteRequest{Policy: policy, Request: &rbv1.HttpRequest{Url: up.URL}})
		if err != nil {
			return nil, err
		}
		m, err := s.Recv()
		if err == nil && m.GetHead() == nil {
			err = fmt.Errorf("first message %v, want the head", m)
		}
		return s, err
	}
	policies := []string{"default", "p1", "p2", "p3"}
	var streams []rbv1.BrokerService_ExecuteStreamClient
	for i := range 8 {
		s, err := open(policies[i%4])
		if err != nil {
			t.Fatalf("stream %d (policy %s): %v", i+1, policies[i%4], err)
		}
		streams = append(streams, s)
	}
	for _, policy := range policies {
		_, err := open(policy)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "across its policies") {
			t.Fatalf("9th stream (policy %s): %v, want RESOURCE_EXHAUSTED naming the tenant's limit", policy, err)
		}
	}
	// One stream ends: its slot is free again, for any policy.
	if err := streams[0].CloseSend(); err != nil {
		t.Fatal(err)
	}
	closeOnce(release)
	for {
		if _, err := streams[0].Recv(); err != nil {
			break
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := open("p3")
		if err == nil {
			_ = s
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("after the streams ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closeOnce closes c unless it is closed.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
