// Command fakeupstream is a scripted HTTP server for trying the broker by
// hand: it answers each request with the next reply of its script and
// repeats the last one, logging when each request arrived.
//
//	fakeupstream --listen 127.0.0.1:8080 --script '503 Retry-After=1; 200'
//
// A reply is a status followed by optional Name=Value headers, separated by
// spaces; replies are separated by semicolons.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type reply struct {
	status int
	header [][2]string
}

func parseScript(s string) ([]reply, error) {
	var out []reply
	for _, part := range strings.Split(s, ";") {
		fields := strings.Fields(part)
		if len(fields) == 0 {
			continue
		}
		code, err := strconv.Atoi(fields[0])
		if err != nil || code < 100 || code > 599 {
			return nil, fmt.Errorf("reply %q: status must be 100-599", part)
		}
		r := reply{status: code}
		for _, f := range fields[1:] {
			name, value, ok := strings.Cut(f, "=")
			if !ok || name == "" {
				return nil, fmt.Errorf("reply %q: header %q must be Name=Value", part, f)
			}
			r.header = append(r.header, [2]string{name, value})
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty script")
	}
	return out, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "listen address")
	script := flag.String("script", "503 Retry-After=1; 200", "replies in order; the last repeats")
	flag.Parse()
	replies, err := parseScript(*script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeupstream:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	n := 0
	start := time.Now()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rep := replies[min(n, len(replies)-1)]
		n++
		i := n
		mu.Unlock()
		slog.Info("request", "n", i, "method", r.Method, "path", r.URL.Path, "since_start", time.Since(start).Round(time.Millisecond), "status", rep.status)
		for _, kv := range rep.header {
			w.Header().Add(kv[0], kv[1])
		}
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, "reply %d: %d\n", i, rep.status)
	})
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	slog.Info("fakeupstream listening", "addr", *listen, "replies", len(replies))
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeupstream:", err)
		os.Exit(1)
	}
}
