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

	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

const providersUsage = `usage:
  broker providers list [--config FILE [--tenant ID]]
  broker providers show NAME [--config FILE [--tenant ID]]
  broker providers test NAME --status N [--header 'Name: value']... [--body FILE] [--method M] [--attempt N] [--now RFC3339]
                        [--config FILE [--tenant ID [--policy NAME]]]
  broker providers docs

list and show print the provider catalog as loaded: the built-in one, or
with --config the built-in one with the file's providers on top, and with
--tenant that tenant's view (its own providers on top of the file's). test
classifies one response with the provider's entry and a policy (the
standard one, or with --tenant the tenant's default policy or --policy) and
says which reader or rule decided; a policy's custom_readers are not
applied. docs prints docs/providers.md, from the built-in catalog (make
generate writes it).`

// catalogFlags are the flags that choose the catalog: --config and
// --tenant.
type catalogFlags struct {
	config, tenant string
}

func (c *catalogFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "a configuration file: show the catalog with its providers")
	fs.StringVar(&c.tenant, "tenant", "", "with --config, a tenant id: show the catalog that tenant sees")
}

// catalogView is the catalog a command shows, and what it is.
type catalogView struct {
	cat    *providers.Catalog
	title  string         // "the built-in catalog 2026.12.1", ...
	tenant *tenant.Tenant // with --tenant
}

// load returns the catalog the flags choose. An invalid configuration
// prints every problem to stderr.
func (c *catalogFlags) load(stderr io.Writer) (*catalogView, error) {
	builtin := providers.Builtin()
	if c.config == "" {
		if c.tenant != "" {
			return nil, errors.New("--tenant needs --config")
		}
		return &catalogView{cat: builtin, title: "the built-in catalog " + builtin.Version()}, nil
	}
	d, err := config.Load(c.config)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p.Error())
			}
			return nil, fmt.Errorf("%s: %d problem(s)", c.config, len(ce.Problems))
		}
		return nil, err
	}
	v := &catalogView{cat: d.Catalog()}
	if c.tenant != "" {
		t, ok := d.Tenant(c.tenant)
		if !ok {
			return nil, fmt.Errorf("no tenant %q in %s", c.tenant, c.config)
		}
		v.cat, v.tenant = t.ProviderCatalog(), t
		v.title = fmt.Sprintf("the catalog of tenant %s in %s", t.ID, c.config)
	} else {
		v.title = "the catalog of " + c.config
	}
	v.title += fmt.Sprintf(" (built-in %s and %d entries of the configuration)", builtin.Version(), countConfigured(v.cat))
	return v, nil
}

// countConfigured counts the entries a configuration defined.
func countConfigured(c *providers.Catalog) int {
	n := 0
	for _, e := range c.Entries() {
		if e.Origin() != "" {
			n++
		}
	}
	return n
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("show NAME --config F" and "show --config F NAME"), and
// returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// providersCommand runs `broker providers ...`. It returns the exit code:
// 0, 1 for a failure, 2 for a usage error.
func providersCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, providersUsage)
		return 2
	}
	switch args[0] {
	case "list", "show":
		fs := flag.NewFlagSet("broker providers "+args[0], flag.ContinueOnError)
		fs.SetOutput(stderr)
		var cf catalogFlags
		cf.register(fs)
		pos, err := parseInterspersed(fs, args[1:])
		if err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if want := map[string]int{"list": 0, "show": 1}[args[0]]; len(pos) != want {
			break
		}
		v, err := cf.load(stderr)
		if err != nil {
			return exitCode(err, stderr)
		}
		if args[0] == "list" {
			return exitCode(listProviders(stdout, v), stderr)
		}
		return exitCode(showProvider(stdout, v, pos[0]), stderr)
	case "test":
		return testProvider(args[1:], stdout, stderr)
	case "docs":
		if len(args) != 1 {
			break
		}
		return exitCode(providers.WriteMarkdown(stdout, providers.Builtin()), stderr)
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

// originOf says where an entry comes from: "built-in", or where the
// configuration defines it.
func originOf(e *providers.Entry) string {
	if o := e.Origin(); o != "" {
		return o
	}
	return "built-in"
}

func listProviders(w io.Writer, v *catalogView) error {
	fmt.Fprintf(w, "%s\n\n", v.title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOSTS\tRULES\tORIGIN\tTITLE")
	for _, e := range v.cat.Entries() {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name(), hosts, rs, originOf(e), e.Spec().Title)
	}
	return tw.Flush()
}

func showProvider(w io.Writer, v *catalogView, name string) error {
	e, err := lookupEntry(v.cat, name)
	if err != nil {
		return err
	}
	if o := e.Origin(); o != "" {
		fmt.Fprintf(w, "# provider %q defined at %s, in %s\n", e.Name(), o, v.title)
		fmt.Fprintln(w, "# as loaded: what it inherits through extends is included")
	} else {
		fmt.Fprintf(w, "# provider %q from %s\n", e.Name(), v.title)
	}
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

func testProvider(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("broker providers test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	status := fs.Int("status", 0, "the response's HTTP status (required)")
	var headers headerFlags
	fs.Var(&headers, "header", "a response header 'Name: value' (repeat for more; order and duplicates are kept)")
	bodyFile := fs.String("body", "", "a file holding the response body (its first 64 KiB are read, as the broker peeks)")
	method := fs.String("method", "GET", "the request's method")
	attempt := fs.Int("attempt", 1, "the 1-based attempt that got the response")
	nowFlag := fs.String("now", "", "the clock for absolute hints, RFC 3339 (default: now)")
	policyName := fs.String("policy", "", "with --tenant, the tenant's policy to decide with (default: its default policy)")
	var cf catalogFlags
	cf.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) != 1 || *status < 100 || *status > 599 {
		fmt.Fprintln(stderr, "broker providers test: want one provider NAME, --status between 100 and 599, and no other arguments")
		fmt.Fprintln(stderr, providersUsage)
		return 2
	}
	if *policyName != "" && cf.tenant == "" {
		fmt.Fprintln(stderr, "broker providers test: --policy needs --tenant")
		return 2
	}
	v, err := cf.load(stderr)
	if err != nil {
		return exitCode(err, stderr)
	}
	e, err := lookupEntry(v.cat, pos[0])
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
	p, policyLabel, err := decisionPolicy(v, *policyName)
	if err != nil {
		return exitCode(err, stderr)
	}
	in := engine.Input{
		Method: *method, Attempt: *attempt, Response: r, Reader: e, Reading: &reading, Now: now,
		HasIdempotencyKey: r.Header.Get(p.IdempotencyHeader) != "",
	}
	d := p.Decide(&in, engine.GlobalRand)
	fmt.Fprintf(stdout, "policy: %s\n", policyLabel)
	printDecision(stdout, e, d, reading, trace, now)
	return 0
}

// decisionPolicy returns the policy test decides with: the tenant's named
// policy (or its default) with --tenant, else the standard policy.
func decisionPolicy(v *catalogView, name string) (*engine.Policy, string, error) {
	if v.tenant == nil {
		p := engine.DefaultPolicy()
		p.Catalog = v.cat
		if err := p.Validate(); err != nil {
			return nil, "", err
		}
		return &p, "the standard policy", nil
	}
	tp, ok := v.tenant.Policy(name)
	if !ok {
		return nil, "", fmt.Errorf("tenant %s has no policy %q", v.tenant.ID, name)
	}
	return &tp.Policy, v.tenant.ID + "/" + tp.Name, nil
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
