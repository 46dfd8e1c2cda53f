package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/metrics"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Stack the Execute path may use on the goroutine that serves it, at its
// deepest wait (parked in the HTTP client for the upstream's response):
// 8 KiB, less the runtime's stack guard (928 bytes on linux/amd64) and
// 512 bytes for the runtime's own frames below that wait (an allocation
// that refills its cache), so that the whole call fits in an 8 KiB stack.
const executeStackBudget = 8<<10 - 928 - 512

// stackChildEnv marks the child process of TestExecuteStackDepth.
const stackChildEnv = "RETRYBROKER_STACK_DEPTH_CHILD"

// Execute's handler fits in the goroutine stack a minimal gRPC-to-HTTP
// forwarder needs. Most calls at 16 or 256 callers run on fresh goroutines
// (every gRPC stream worker busy), whose stacks the runtime starts small
// and grows by copying them whole, walking every frame: a broker whose
// path needs a 16 KiB stack where the forwarder's fits in 8 KiB pays a copy
// per call that the forwarder does not (issue 22: it was the largest
// single cost of the broker's own share at 256 callers).
//
// The depths are read off a crash dump: a child process serves one call
// of each, both parked in the HTTP client while the upstream holds their
// requests, and dies on SIGQUIT with GOTRACEBACK=system, which prints
// every frame's fp and sp. A goroutine's depth is its outermost frame's
// fp less its innermost frame's sp.
func TestExecuteStackDepth(t *testing.T) {
	if os.Getenv(stackChildEnv) != "" {
		parkExecuteCalls(t)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestExecuteStackDepth$", "-test.count=1")
	cmd.Env = append(os.Environ(), stackChildEnv+"=1", "GOTRACEBACK=system")
	cmd.WaitDelay = 10 * time.Second
	var dump bytes.Buffer
	cmd.Stderr = &dump
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // by its pid, whatever happened
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "parked\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child: %q %v\n%s", line, err, dump.String())
	}
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // exits 2 on SIGQUIT
	// The frames are found by the names the suite's profiles use
	// (server.ProfileFuncs), which this checks against a real stack.
	brokerExecute, _ := server.ProfileFuncs()
	fwd := stackDepth(t, dump.String(), server.FuncName(baseline.Forwarder.Execute)+"(")
	brk := stackDepth(t, dump.String(), brokerExecute+"(")
	t.Logf("stack of the serving goroutine, parked for the upstream's response: forwarder %d B, broker %d B (budget %d B; race detector %v)", fwd, brk, executeStackBudget, raceDetector)
	// The broker's own frames above the HTTP client: at most 1 KiB more
	// than the forwarder's (2,704 B more when the broker needed 16 KiB).
	if brk > fwd+executeStackOverForwarder {
		t.Errorf("a broker Execute used %d B of stack, %d B more than the forwarder's %d B (at most %d B more)", brk, brk-fwd, fwd, executeStackOverForwarder)
	}
	// The race detector's instrumentation makes every frame larger, the
	// forwarder's too: the absolute budget holds for the broker as built.
	if !raceDetector && brk > executeStackBudget {
		t.Errorf("a broker Execute used %d B of stack, over the %d B that fit an 8 KiB stack (the forwarder: %d B)", brk, executeStackBudget, fwd)
	}
}

// executeStackOverForwarder is how much deeper than the forwarder's the
// broker's Execute path may be.
const executeStackOverForwarder = 1 << 10

// parkExecuteCalls is the child of TestExecuteStackDepth: it sends one
// Execute to the broker (wired as cmd/broker wires it) and one to the
// minimal forwarder, waits until the upstream holds both requests, says
// "parked" on stdout and waits for its SIGQUIT.
func parkExecuteCalls(t *testing.T) {
	arrived := make(chan struct{}, 2)
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		select {} // held until the process dies
	}))
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	runner := engine.NewRunner(memstore.New(), engine.WithObserver(metrics.New()))
	broker := server.New(server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: runner, Clients: egress.NewClients(egress.ClientConfig{})}))
	forwarder := baseline.Forwarder{Client: &http.Client{Transport: &http.Transport{}}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/v1/items"}}
	for _, svc := range []rbv1.BrokerServiceServer{forwarder, broker} {
		client := serveBroker(t, svc, server.GRPCConfig{Logger: quiet})
		go func() { _, _ = client.Execute(context.Background(), req) }()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the calls did not reach the upstream in 30 s")
		}
	}
	fmt.Println("parked")
	time.Sleep(time.Minute) // the parent's SIGQUIT ends the process; the parent's context kills it otherwise
	t.Fatal("no SIGQUIT within a minute")
}

// frameAddrs matches the fp and sp a GOTRACEBACK=system dump prints per frame.
var frameAddrs = regexp.MustCompile(`fp=0x([0-9a-f]+) sp=0x([0-9a-f]+)`)

// stackDepth returns the stack depth, in bytes, of the one goroutine in
// dump whose stack holds fn: its outermost frame's fp less its innermost
// frame's sp.
func stackDepth(t *testing.T, dump, fn string) int {
	t.Helper()
	found := -1
	for _, g := range strings.Split(dump, "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") || !strings.Contains(g, fn) {
			continue
		}
		if found >= 0 {
			t.Fatalf("more than one goroutine holds %s", fn)
		}
		var hi, lo uint64
		for _, m := range frameAddrs.FindAllStringSubmatch(g, -1) {
			fp, _ := strconv.ParseUint(m[1], 16, 64)
			sp, _ := strconv.ParseUint(m[2], 16, 64)
			hi = max(hi, fp)
			if lo == 0 || sp < lo {
				lo = sp
			}
		}
		if lo == 0 || hi <= lo {
			t.Fatalf("no frame addresses in the dump of %s:\n%s", fn, g)
		}
		found = int(hi - lo)
	}
	if found < 0 {
		t.Fatalf("no goroutine holds %s in the dump:\n%s", fn, dump)
	}
	return found
}
