package egress_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// headHandler answers with a head shaped by shape: "bytes:N" one header of
// N bytes, "spread:N" N bytes in headers of 256 KiB, "lines:N" N short
// header lines; then a small body.
func headHandler(shape string) http.HandlerFunc {
	kind, n, _ := strings.Cut(shape, ":")
	size, _ := strconv.Atoi(n)
	return func(w http.ResponseWriter, _ *http.Request) {
		switch kind {
		case "bytes":
			w.Header().Set("X-Big", strings.Repeat("a", size))
		case "spread":
			for i := 0; i < size; i += 256 << 10 {
				w.Header().Add("X-Big", strings.Repeat("a", min(256<<10, size-i)))
			}
		case "lines":
			for i := range size {
				w.Header().Add("X-L", strconv.Itoa(i))
			}
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// TestResponseHeadersOverTheCap (issue 17, defect 3): heads of 2 MiB and 8
// MiB and of 20,000 lines were passed through (only net/http's own 10 MiB
// stopped them). Over either cap the round trip fails with
// ErrResponseHeadersTooLarge, classified as its own transport kind; heads
// just within the caps pass.
func TestResponseHeadersOverTheCap(t *testing.T) {
	for _, tc := range []struct {
		shape string
		over  bool
	}{
		{"bytes:" + strconv.Itoa(2<<20), true},
		{"bytes:" + strconv.Itoa(8<<20), true},
		{"lines:20000", true},
		{"lines:" + strconv.Itoa(egress.MaxResponseHeaderLines+1), true},
		{"bytes:" + strconv.Itoa(egress.MaxResponseHeaderBytes-4096), false},
		{"lines:" + strconv.Itoa(egress.MaxResponseHeaderLines-10), false}, // net/http adds Date, Content-Length, Content-Type
	} {
		t.Run(tc.shape, func(t *testing.T) {
			srv := newUpstream(t, headHandler(tc.shape))
			c := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32))}, nil, nil)
			checkHead(t, c, srv.URL, tc.over)
		})
	}
}

// TestResponseHeadersOverTheCapHTTP2: the same caps hold on HTTP/2, where
// the transport counts the header list its own way. A head over the byte
// cap may instead end the connection with an HTTP/2 protocol or compression
// error (net/http's server refuses to send more than the client advertised;
// a single value over the cap fails the decoder): TransportOther, but it
// never passes either.
func TestResponseHeadersOverTheCapHTTP2(t *testing.T) {
	for _, tc := range []struct {
		shape string
		over  bool
	}{
		{"lines:20000", true},
		{"lines:100", false},
		{"spread:" + strconv.Itoa(2<<20), true},
		{"bytes:" + strconv.Itoa(8<<20), true},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(headHandler(tc.shape))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			tlsCfg := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}
			c := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32)), TLSClientConfig: tlsCfg}, nil, nil)
			if strings.HasPrefix(tc.shape, "lines") {
				if proto := checkHead(t, c, srv.URL, tc.over); !tc.over && proto != 2 {
					t.Errorf("protocol HTTP/%d, want HTTP/2", proto)
				}
				return
			}
			resp, err := get(context.Background(), c, srv.URL, nil)
			if err == nil {
				resp.Body.Close()
				t.Fatal("head over the cap passed through")
			}
			if k := egress.Classify(err); k != engine.TransportResponseHeadersTooLarge && k != engine.TransportOther {
				t.Errorf("classified %v (%v)", k, err)
			}
		})
	}
}

func checkHead(t *testing.T, c *http.Client, url string, over bool) int {
	t.Helper()
	resp, err := get(context.Background(), c, url, nil)
	if !over {
		if err != nil {
			t.Fatalf("head within the caps refused: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "ok" {
			t.Errorf("body %q", body)
		}
		return resp.ProtoMajor
	}
	if err == nil {
		resp.Body.Close()
		t.Fatalf("head over the cap passed through (%d header names)", len(resp.Header))
	}
	if !errors.Is(err, egress.ErrResponseHeadersTooLarge) {
		t.Fatalf("error %v, want ErrResponseHeadersTooLarge", err)
	}
	if k := egress.Classify(err); k != engine.TransportResponseHeadersTooLarge || !k.Retryable() {
		t.Errorf("classified %v (retryable %v), want response_headers_too_large, retryable", k, k.Retryable())
	}
	return 0
}
