// Command benchsuite runs the retry broker's benchmark suite (package
// bench/suite) from the repository root: it prints the results as markdown
// tables and writes docs/benchmarks.md and the PNG charts in
// docs/benchmarks/.
//
//	go run ./bench/cmd/benchsuite               # the full run (about 20 minutes)
//	go run ./bench/cmd/benchsuite -quick        # a smoke run (about a minute)
//	go run ./bench/cmd/benchsuite -only herd    # issue 18's herd rows (about 3 minutes)
//	go run ./bench/cmd/benchsuite -only rolling # the rolling restart (about 75 s)
//	go run ./bench/cmd/benchsuite -only credentials -doc /tmp/cred.md -charts "" # issue 19's overhead rows
//	go run ./bench/cmd/benchsuite -only tasks -doc /tmp/tasks.md -charts "" # issue 20's rows (about 8 minutes)
//
// All traffic stays on 127.0.0.1. It needs go (to build ./cmd/broker,
// unless -broker is given) and redis-server on PATH.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retrybroker/retrybroker/bench/suite"
)

func main() {
	os.Exit(run())
}

func run() int {
	quick := flag.Bool("quick", false, "short smoke run (numbers not meant to be quoted)")
	brokerBin := flag.String("broker", "", "broker binary to run (default: go build ./cmd/broker into a temporary directory)")
	redisBin := flag.String("redis-server", "", "redis-server binary of the single server (default: from PATH; the cluster and Sentinel nodes always use the one on PATH)")
	doc := flag.String("doc", "docs/benchmarks.md", "markdown report to write (empty: none)")
	charts := flag.String("charts", "docs/benchmarks", "directory for the PNG charts (empty: none)")
	only := flag.String("only", "", "comma-separated scenarios to run: quota, herd, rolling, outage, overhead, parked, scale, stream, credentials, tasks (default: all)")
	styles := flag.String("styles", "", "comma-separated provider styles for the quota, herd and rolling scenarios: github, azure, jira, retry-after (default: all; herd and rolling run github and retry-after)")
	trace := flag.String("trace", "", "directory for per-row CSV traces of every provider arrival (default: none)")
	timeout := flag.Duration("timeout", 30*time.Minute, "stop the run after this long")
	overheadConc := flag.String("overhead-concurrency", "", "comma-separated concurrency levels of the overhead scenario (default: 1,16,256)")
	oneCallerScale := flag.Int("one-caller-scale", 0, "multiply the overhead scenario's one-caller rounds (100 of 30 ms per variant) by this (default: 4)")
	ttfbScale := flag.Int("ttfb-scale", 1, "multiply the stream scenario's time-to-first-byte calls and rounds (24,000 calls in 12 rounds per row) by this")
	manyCallerScale := flag.Int("many-caller-scale", 0, "multiply the overhead scenario's rounds above one caller (20 of 150 ms per variant and level) by this (default: 4)")
	bodyBudget := flag.Int64("body-budget", 0, "the overhead scenario's in-process body budget in bytes (default: the broker's, 268435456; investigations only: the report says which was used)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the suite's own process (the in-process scenarios: overhead, stream, parked) to this file; make pgo turns one into cmd/broker/default.pgo")
	flag.Parse()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchsuite:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "benchsuite:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cmdline := "go run ./bench/cmd/benchsuite"
	if *quick {
		cmdline += " -quick"
	}
	if *only != "" {
		cmdline += " -only " + *only
	}
	if *styles != "" {
		cmdline += " -styles " + *styles
	}
	o := suite.Options{
		Quick: *quick, BrokerBin: *brokerBin, RedisServer: *redisBin,
		DocPath: *doc, ChartDir: *charts, TraceDir: *trace, Command: cmdline, Log: os.Stderr,
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if *styles != "" {
		o.Styles = strings.Split(*styles, ",")
	}
	for _, c := range strings.Split(*overheadConc, ",") {
		if c == "" {
			continue
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "benchsuite: -overhead-concurrency: not a positive number:", c)
			return 2
		}
		o.OverheadConcurrency = append(o.OverheadConcurrency, n)
	}
	if *ttfbScale < 1 {
		fmt.Fprintln(os.Stderr, "benchsuite: -ttfb-scale: not a positive number:", *ttfbScale)
		return 2
	}
	o.TTFBScale = *ttfbScale
	for name, v := range map[string]int64{"one-caller-scale": int64(*oneCallerScale), "many-caller-scale": int64(*manyCallerScale), "body-budget": *bodyBudget} {
		if v < 0 {
			fmt.Fprintf(os.Stderr, "benchsuite: -%s: a negative number: %d\n", name, v)
			return 2
		}
	}
	o.OneCallerScale, o.ManyCallerScale, o.BodyBudget = *oneCallerScale, *manyCallerScale, *bodyBudget
	rep, err := suite.Run(ctx, o)
	if rep != nil {
		fmt.Print(rep.Markdown())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsuite:", err)
		return 1
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintln(os.Stderr, "benchsuite: some scenarios failed:", strings.Join(rep.Errors, "; "))
		return 1
	}
	return 0
}
