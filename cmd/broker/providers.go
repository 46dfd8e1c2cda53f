package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
)

const providersUsage = `usage:
  broker providers list
  broker providers show NAME
  broker providers test NAME --status N [--header 'Name: value']... [--body FILE] [--method M] [--attempt N] [--now RFC3339]
  broker providers docs

list and show print the built-in provider catalog as loaded; test classifies
one response with the default policy and says which reader or rule decided;
docs prints docs/providers.md (make generate writes it).`

// providersCommand runs `broker providers ...`. It returns the exit code:
// 0, 1 for a failure, 2 for a usage error.
func providersCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, providersUsage)
		return 2
	}
	cat := providers.Builtin()
	var err error
	switch args[0] {
	case "list":
		if len(args) != 1 {
			break
		}
		err = listProviders(stdout, cat)
		return exitCode(err, stderr)
	case "show":
		if len(args) != 2 {
			break
		}
		err = showProvider(stdout, cat, args[1])
		return exitCode(err, stderr)
	case "test":
		return testProvider(args[1:], stdout, stderr, cat)
	case "docs":
		if len(args) != 1 {
			break
		}
		return exitCode(providers.WriteMarkdown(stdout, cat), stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, providersUsage)
		return 0
	}
	fmt.Fprintln(stderr, providersUsage)
	return 2
}

func exitCode(err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "broker providers:", err)
		return 1
	}
	return 0
}

func lookupEntry(cat *providers.Catalog, name string) (*providers.Entry, error) {
	e, ok := cat.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(cat.Names(), ", "))
	}
	return e, nil
}

func listProviders(w io.Writer, cat *providers.Catalog) error {
	fmt.Fprintf(w, "built-in catalog %s\n\n", cat.Version())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOSTS\tRULES\tTITLE")
	for _, e := range cat.Entries() {
		hosts := strings.Join(e.Hosts(), ",")
		if hosts == "" {
			hosts = "-"
		}
		var rules []string
		for _, r := range e.Spec().Rules {
			rules = append(rules, r.Name)
		}
		rs := strings.Join(rules, ",")
		if rs == "" {
			rs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name(), hosts, rs, e.Spec().Title)
	}
	return tw.Flush()
}

func showProvider(w io.Writer, cat *providers.Catalog, name string) error {
	e, err := lookupEntry(cat, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# provider %q from the built-in catalog %s\n", e.Name(), cat.Version())
	var body []string
	for s := 100; s < 600; s++ {
		if e.NeedsBody(s) {
			body = append(body, fmt.Sprint(s))
		}
	}
	if len(body) > 0 {
		fmt.Fprintf(w, "# reads the body of: %s\n", compressStatuses(body))
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(e.Spec()); err != nil {
		return fmt.Errorf("show %s: %w", name, err)
	}
	return enc.Close()
}

// compressStatuses shortens "400 401 ... 599" to "400-599".
func compressStatuses(ss []string) string {
	if len(ss) >= 200 && ss[len(ss)-200] == "400" && ss[len(ss)-1] == "599" {
		return strings.Join(append(ss[:len(ss)-200:len(ss)-200], "400-599"), ", ")
	}
	return strings.Join(ss, ", ")
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags []string

func (h *headerFlags) String() string { return strings.Join(*h, "; ") }

func (h *headerFlags) Set(v string) error {
	name, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return errors.New("want 'Name: value'")
	}
	*h = append(*h, v)
	return nil
}

func testProvider(args []string, stdout, stderr io.Writer, cat *providers.Catalog) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, providersUsage)
		return 2
	}
	name := args[0]
	fs := flag.NewFlagSet("broker providers test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	status := fs.Int("status", 0, "the response's HTTP status (required)")
	var headers headerFlags
	fs.Var(&headers, "header", "a response header 'Name: value' (repeat for more; order and duplicates are kept)")
	bodyFile := fs.String("body", "", "a file holding the response body (its first 64 KiB are read, as the broker peeks)")
	method := fs.String("method", "GET", "the request's method")
	attempt := fs.Int("attempt", 1, "the 1-based attempt that got the response")
	nowFlag := fs.String("now", "", "the clock for absolute hints, RFC 3339 (default: now)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *status < 100 || *status > 599 {
		fmt.Fprintln(stderr, "broker providers test: --status between 100 and 599 is required, and no other arguments")
		return 2
	}
	e, err := lookupEntry(cat, name)
	if err != nil {
		return exitCode(err, stderr)
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		if now, err = time.Parse(time.RFC3339Nano, *nowFlag); err != nil {
			return exitCode(fmt.Errorf("--now: %w", err), stderr)
		}
	}
	r := &providers.Response{Status: *status, Header: http.Header{}, Now: now, Method: *method, Attempt: *attempt}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		r.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if *bodyFile != "" {
		if r.Body, err = readPeek(*bodyFile, 64<<10); err != nil {
			return exitCode(err, stderr)
		}
	}
	reading, trace := e.Explain(r)
	p := engine.DefaultPolicy()
	if err := p.Validate(); err != nil {
		return exitCode(err, stderr)
	}
	in := engine.Input{
		Method: *method, Attempt: *attempt, Response: r, Reader: e, Reading: &reading, Now: now,
		HasIdempotencyKey: r.Header.Get(p.IdempotencyHeader) != "",
	}
	d := p.Decide(&in, engine.GlobalRand)
	printDecision(stdout, e, d, reading, trace, now)
	return 0
}

// readPeek reads at most limit bytes of a file.
func readPeek(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--body: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("--body: %w", err)
	}
	return b, nil
}

func printDecision(w io.Writer, e *providers.Entry, d engine.Decision, reading providers.Reading, tr providers.Trace, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(tw, "provider:\t%s\n", e.Name())
	fmt.Fprintf(tw, "action:\t%s\n", d.Action)
	if d.Action == engine.ActionRetry {
		fmt.Fprintf(tw, "delay:\t%s\n", d.Delay)
	}
	fmt.Fprintf(tw, "reason:\t%s\n", d.Reason)
	if d.HasHint {
		fmt.Fprintf(tw, "hint:\t%s from %s\n", d.Hint, dash(reading.Hint.Source))
	} else {
		fmt.Fprintf(tw, "hint:\t-\n")
	}
	fmt.Fprintf(tw, "hint source:\t%s\n", dash(d.HintSource))
	fmt.Fprintf(tw, "rule:\t%s\n", dash(d.Rule))
	fmt.Fprintf(tw, "hint read by:\t%s\n", dash(tr.Hint))
	fmt.Fprintf(tw, "verdict:\t%s\n", dash(verdictText(reading, tr)))
	if reading.HasQuota {
		q := reading.Quota
		limit := ""
		if q.Limit > 0 {
			limit = fmt.Sprintf(" of %d", q.Limit)
		}
		fmt.Fprintf(tw, "quota:\t%d%s left, resets %s (in %s), from %s\n", q.Remaining, limit, q.Reset.Format(time.RFC3339Nano), q.Reset.Sub(now), tr.Quota)
	} else {
		fmt.Fprintf(tw, "quota:\t-\n")
	}
	fmt.Fprintf(tw, "scope:\t%s\n", dash(reading.Scope))
	_ = tw.Flush()
	if len(tr.Rules) > 0 {
		fmt.Fprintln(w, "rules evaluated:")
		for _, rt := range tr.Rules {
			res := "no match"
			if rt.Matched {
				res = "matched"
			}
			if rt.Err != "" {
				res += " (" + rt.Err + ")"
			}
			fmt.Fprintf(w, "  %s: %s\n", rt.Name, res)
		}
	}
}

func verdictText(reading providers.Reading, tr providers.Trace) string {
	switch {
	case tr.Verdict != "":
		return tr.Verdict
	case reading.Verdict != providers.VerdictNone && reading.Rule != "":
		return reading.Verdict.String() + " (rule " + reading.Rule + ")"
	}
	return ""
}
