package suite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// CredentialsParams sizes the credentials scenario (issue 19's overhead
// rows): Execute through one broker process with a broker-held credential
// against the same broker and configuration without one.
type CredentialsParams struct {
	// Concurrency is the number of closed-loop callers (the 16).
	Concurrency int
	// Rounds per variant; the two variants of a row alternate round by
	// round (A B, then B A, ...).
	Rounds int
	// Round is the length of one measured round.
	Round time.Duration
	// MaxCallsPerRound bounds a round besides its length.
	MaxCallsPerRound int
	// BodyBytes is the PUT body of the SigV4 row (the 1 KiB).
	BodyBytes int
}

// credentialsParams returns the scenario's sizes for a full or quick run.
func credentialsParams(quick bool) CredentialsParams {
	if quick {
		return CredentialsParams{Concurrency: 16, Rounds: 2, Round: 60 * time.Millisecond, MaxCallsPerRound: 20_000, BodyBytes: 1024}
	}
	return CredentialsParams{Concurrency: 16, Rounds: 20, Round: 150 * time.Millisecond, MaxCallsPerRound: 2_000_000, BodyBytes: 1024}
}

// CredentialRow is one side-by-side pair of the credentials scenario.
type CredentialRow struct {
	// Name says what the row measures; Kind is the credential's kind.
	Name, Kind string
	// Target is the lower bound on With/Without throughput; 0 for
	// a row reported without a target.
	Target float64
	// Without and With are the two variants: the same request through the
	// same broker under a policy without and with the credential.
	Without, With OverheadResult
}

// Share is the median of the per-round throughput ratios With/Without
// (rounds ran back to back), or the ratio of the totals when no round
// pair is usable; ok is false when Without measured nothing.
func (c CredentialRow) Share() (float64, bool) {
	return roundRatio(c.With, c.Without)
}

// TotalShare is With/Without throughput over all rounds.
func (c CredentialRow) TotalShare() (float64, bool) {
	if c.Without.Throughput == 0 {
		return 0, false
	}
	return c.With.Throughput / c.Without.Throughput, true
}

// CredentialsReport is the credentials scenario's result.
type CredentialsReport struct {
	Params CredentialsParams
	Rows   []CredentialRow
	// Brokers is the number of broker processes the scenario ran (one:
	// every row's variants are policies of the same configuration).
	Brokers int
	// TokenRequests is the number of requests the loopback token endpoint
	// answered during the scenario (warm-up included): the OAuth2 row
	// measures the cached path, so 1 per broker process.
	TokenRequests int64
}

// Credentials scenario policies, one per variant, and the credentials the
// policies name.
const (
	credPolicyNone    = "none"
	credPolicyHeader  = "header"
	credPolicyOAuth2  = "oauth2"
	credPolicySigV4   = "sigv4"
	credPolicyHMAC    = "hmac"
	credPolicyEd25519 = "ed25519"
)

// roundRatio is the median of the per-round ratios of a over b (the totals'
// ratio when no round pair is usable).
func roundRatio(a, b OverheadResult) (float64, bool) {
	if b.Throughput == 0 {
		return 0, false
	}
	var ratios []float64
	for i := range min(len(a.RoundThroughput), len(b.RoundThroughput)) {
		if b.RoundThroughput[i] > 0 {
			ratios = append(ratios, a.RoundThroughput[i]/b.RoundThroughput[i])
		}
	}
	if len(ratios) == 0 {
		return a.Throughput / b.Throughput, true
	}
	return median(ratios), true
}

// median of xs (not empty); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// credSecrets writes the scenario's secret files (bench values, published
// on purpose: the broker listens on 127.0.0.1 for the scenario only) and
// returns their paths by name.
func credSecrets(dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"header-key":    []byte("bench-header-secret\n"),
		"client-secret": []byte("bench-client-secret\n"),
		"aws-key-id":    []byte("AKIABENCHSUITE000000\n"),
		"aws-secret":    []byte("benchsuite/secret/access/key/000000000000\n"),
		"hmac-key":      []byte("bench-hmac-shared-secret-32bytes"),
		"ed25519.pem":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
	}
	out := map[string]string{}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}

// credentialsYAML is the scenario's --config file: one tenant with the
// five credentials and one policy per variant, all allowed to call
// 127.0.0.1; the OAuth2 credential's token endpoint is tokenURL.
func credentialsYAML(secrets map[string]string, tokenURL string) []byte {
	sum := sha256.Sum256([]byte(benchAPIKey))
	var b strings.Builder
	b.WriteString("# credentials: written by bench/suite for the credentials scenario of the benchmark suite.\nversion: 1\ntenants:\n")
	fmt.Fprintf(&b, "  - id: %s\n    api_key_sha256: [%s]\n    default_policy: %s\n    credentials:\n", benchTenant, hex.EncodeToString(sum[:]), credPolicyNone)
	fmt.Fprintf(&b, "      bench-header: {kind: header, name: Authorization, prefix: \"Bearer \", value_file: %q}\n", secrets["header-key"])
	fmt.Fprintf(&b, "      bench-oauth2: {kind: oauth2_client_credentials, token_url: %q, client_id: bench, client_secret_file: %q, auth_style: header, allow_destinations: [\"127.0.0.1/32\"]}\n", tokenURL, secrets["client-secret"])
	fmt.Fprintf(&b, "      bench-sigv4: {kind: aws_sigv4, region: eu-west-1, service: s3, access_key_id_file: %q, secret_access_key_file: %q}\n", secrets["aws-key-id"], secrets["aws-secret"])
	fmt.Fprintf(&b, "      bench-hmac: {kind: http_signature, algorithm: hmac-sha256, key_id: bench-hmac, key_file: %q}\n", secrets["hmac-key"])
	fmt.Fprintf(&b, "      bench-ed25519: {kind: http_signature, algorithm: ed25519, key_id: bench-ed25519, key_file: %q}\n", secrets["ed25519.pem"])
	b.WriteString("    policies:\n")
	fmt.Fprintf(&b, "      %s: {allow_destinations: [\"127.0.0.1/32\"]}\n", credPolicyNone)
	for _, p := range [][2]string{
		{credPolicyHeader, "bench-header"},
		{credPolicyOAuth2, "bench-oauth2"},
		{credPolicySigV4, "bench-sigv4"},
		{credPolicyHMAC, "bench-hmac"},
		{credPolicyEd25519, "bench-ed25519"},
	} {
		fmt.Fprintf(&b, "      %s: {allow_destinations: [\"127.0.0.1/32\"], credential: %s}\n", p[0], p[1])
	}
	return []byte(b.String())
}

// credentialsRun measures Execute with each kind of broker-held credential
// against Execute without one: one broker process (the suite's binary,
// --config with one policy per variant), a loopback upstream, a loopback
// token endpoint that counts its requests, p.Concurrency callers in a
// closed loop, the two variants of a row in alternating rounds.
func (s *suite) credentialsRun(ctx context.Context, p CredentialsParams) (*CredentialsReport, error) {
	rep := &CredentialsReport{Params: p}

	// The upstream: reads the body, answers a small JSON body. It checks
	// nothing: what is measured is the broker's cost of applying the
	// credential.
	upLis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return rep, err
	}
	var upConns atomic.Int64
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}), ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			upConns.Add(1)
		}
	}}
	go func() { _ = up.Serve(upLis) }()
	defer up.Close()
	upURL := "http://" + upLis.Addr().String() + "/v1/items"

	// The token endpoint: a fake, since only the cached path is measured
	// (the real OAuth2 server is in internal/credential's tests). Tokens
	// live an hour.
	tokLis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return rep, err
	}
	var tokens atomic.Int64
	tok := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		n := tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, `{"access_token":"bench-token-%d","token_type":"Bearer","expires_in":3600}`, n)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = tok.Serve(tokLis) }()
	defer tok.Close()

	secrets, err := credSecrets(filepath.Join(s.tmp, "credentials"))
	if err != nil {
		return rep, err
	}
	dir := filepath.Join(s.tmp, "configs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return rep, err
	}
	cfg := filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(cfg, credentialsYAML(secrets, "http://"+tokLis.Addr().String()+"/oauth2/token"), 0o600); err != nil {
		return rep, err
	}
	if err := checkBrokerConfig(ctx, s.brokerBin, cfg); err != nil {
		return rep, fmt.Errorf("configuration %q: %w", "credentials", err)
	}
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{config: cfg})
	if err != nil {
		return rep, err
	}
	defer b.stop(2 * time.Second)
	rep.Brokers = 1
	cl, conn, err := tenantClient(b.addr)
	if err != nil {
		return rep, err
	}
	defer conn.Close()

	body := make([]byte, p.BodyBytes)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	execute := func(name, policy, method string, body []byte) variant {
		req := &rbv1.ExecuteRequest{Policy: policy, Request: &rbv1.HttpRequest{Method: method, Url: upURL, Body: body}}
		if body != nil {
			req.Request.Headers = []*rbv1.HttpHeader{{Name: "Content-Type", Value: "application/octet-stream"}}
		}
		return variant{"credentials", name, func(ctx context.Context) error {
			resp, err := cl.Execute(ctx, req)
			if err != nil {
				return err
			}
			if resp.GetResponse().GetStatusCode() != 200 {
				return fmt.Errorf("execute (policy %s): status %d outcome %v", policy, resp.GetResponse().GetStatusCode(), resp.GetOutcome())
			}
			return nil
		}}
	}
	bodyLabel := fmt.Sprintf("PUT %s", fmtBytes(float64(p.BodyBytes)))
	rows := []struct {
		row    CredentialRow
		a, b   variant
		method string
	}{
		{
			row: CredentialRow{Name: "header credential (value_file), GET", Kind: "header", Target: 0.97},
			a:   execute("GET, no credential", credPolicyNone, "GET", nil), b: execute("GET, header", credPolicyHeader, "GET", nil),
		},
		{
			row: CredentialRow{Name: "oauth2_client_credentials, cached token, GET", Kind: "oauth2_client_credentials", Target: 0.95},
			a:   execute("GET, no credential", credPolicyNone, "GET", nil), b: execute("GET, oauth2 (cached)", credPolicyOAuth2, "GET", nil),
		},
		{
			row: CredentialRow{Name: "aws_sigv4, " + bodyLabel, Kind: "aws_sigv4", Target: 0.90},
			a:   execute(bodyLabel+", no credential", credPolicyNone, "PUT", body), b: execute(bodyLabel+", aws_sigv4", credPolicySigV4, "PUT", body),
		},
		{
			row: CredentialRow{Name: "http_signature hmac-sha256, GET", Kind: "http_signature"},
			a:   execute("GET, no credential", credPolicyNone, "GET", nil), b: execute("GET, hmac-sha256", credPolicyHMAC, "GET", nil),
		},
		{
			row: CredentialRow{Name: "http_signature ed25519, GET", Kind: "http_signature"},
			a:   execute("GET, no credential", credPolicyNone, "GET", nil), b: execute("GET, ed25519", credPolicyEd25519, "GET", nil),
		},
	}
	var errs []error
	c := p.Concurrency
	for _, r := range rows {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		s.logf("credentials: %s at concurrency %d", r.row.Name, c)
		g := []variant{r.a, r.b}
		for _, v := range g { // warm up: connections, pools, the token
			runRound(ctx, v, c, p.Round/2, p.MaxCallsPerRound)
		}
		acc := make([]roundAcc, len(g))
		for k := range p.Rounds {
			for i := range g {
				j := i
				if k%2 == 1 {
					j = len(g) - 1 - i
				}
				c0 := upConns.Load()
				a := runRound(ctx, g[j], c, p.Round, p.MaxCallsPerRound)
				a.conns = upConns.Load() - c0
				acc[j].add(a)
			}
		}
		row := r.row
		row.Without, row.With = acc[0].result(g[0], c), acc[1].result(g[1], c)
		for _, res := range []OverheadResult{row.Without, row.With} {
			if res.Errors > 0 {
				errs = append(errs, fmt.Errorf("%s: %s: %d errors (%s)", row.Name, res.Variant, res.Errors, firstErr(acc, res.Variant, g)))
			}
		}
		x, _ := row.Share()
		s.logf("credentials: %-44s %7.0f vs %7.0f calls/s (%.1f%%)  p50 %v vs %v  p99 %v vs %v",
			row.Name, row.With.Throughput, row.Without.Throughput, 100*x, row.With.P50, row.Without.P50, row.With.P99, row.Without.P99)
		rep.Rows = append(rep.Rows, row)
	}
	rep.TokenRequests = tokens.Load()
	s.logf("credentials: the token endpoint answered %d requests for %d broker process(es)", rep.TokenRequests, rep.Brokers)
	if rep.TokenRequests != int64(rep.Brokers) {
		errs = append(errs, fmt.Errorf("the token endpoint answered %d requests, want %d (one per broker process): the cached path was not what was measured", rep.TokenRequests, rep.Brokers))
	}
	return rep, errors.Join(errs...)
}

// firstErr is the first error message of variant name among g's accumulators.
func firstErr(acc []roundAcc, name string, g []variant) string {
	for i, v := range g {
		if v.name == name {
			return acc[i].firstErr
		}
	}
	return ""
}

// credentialsTargets are issue 19's overhead targets, one per row with a
// target, and the token endpoint's request count.
func (r *Report) credentialsTargets() []Target {
	cr := r.Credentials
	if cr == nil {
		return nil
	}
	var out []Target
	for _, row := range cr.Rows {
		if row.Target == 0 {
			continue
		}
		name := fmt.Sprintf("Execute with %s ≥ %.0f%% of Execute without, concurrency %d", row.Name, 100*row.Target, cr.Params.Concurrency)
		x, ok := row.Share()
		if !ok {
			out = append(out, Target{name, "nothing measured without the credential", "n/a"})
			continue
		}
		out = append(out, Target{name, fmt.Sprintf("%.1f%%", 100*x), yesNo(x >= row.Target)})
	}
	if len(cr.Rows) > 0 {
		out = append(out, Target{
			fmt.Sprintf("oauth2_client_credentials, cached token: 1 token request per broker process (%d process)", cr.Brokers),
			fmt.Sprintf("%d", cr.TokenRequests), yesNo(cr.TokenRequests == int64(cr.Brokers)),
		})
	}
	return out
}

// credentialsFindings explain the credentials rows that missed their target.
func (r *Report) credentialsFindings() []string {
	cr := r.Credentials
	if cr == nil {
		return nil
	}
	var out []string
	for _, row := range cr.Rows {
		x, ok := row.Share()
		if row.Target == 0 || !ok || x >= row.Target {
			continue
		}
		out = append(out, fmt.Sprintf("Execute with %s: %.1f%% of Execute without (target %.0f%%); p50 %s against %s, p99 %s against %s.",
			row.Name, 100*x, 100*row.Target, fmtDur(row.With.P50), fmtDur(row.Without.P50), fmtDur(row.With.P99), fmtDur(row.Without.P99)))
	}
	return out
}

// CredentialsTable is the credentials scenario's table.
func (r *Report) CredentialsTable() string {
	cr := r.Credentials
	if cr == nil {
		return ""
	}
	var b strings.Builder
	p := cr.Params
	fmt.Fprintf(&b, "Broker-held credentials: %d closed-loop callers, %d alternating rounds of %v per variant; the share is the median of the per-round ratios of calls/s with the credential over calls/s without (the ratio of all rounds' totals in brackets). The token endpoint answered %d request(s) for %d broker process(es).\n\n",
		p.Concurrency, p.Rounds, p.Round, cr.TokenRequests, cr.Brokers)
	b.WriteString("| row | calls/s without | calls/s with | share | target | met | p50 without | p50 with | p99 without | p99 with |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n")
	for _, row := range cr.Rows {
		share, met, target := "–", "n/a", "–"
		if x, ok := row.Share(); ok {
			t, _ := row.TotalShare()
			share = fmt.Sprintf("%.1f%% (%.1f%%)", 100*x, 100*t)
			if row.Target > 0 {
				met = yesNo(x >= row.Target)
			}
		}
		if row.Target > 0 {
			target = fmt.Sprintf("≥ %.0f%%", 100*row.Target)
		} else {
			met = "(no target)"
		}
		errs := ""
		if n := row.With.Errors + row.Without.Errors; n > 0 {
			errs = fmt.Sprintf(" (%d errors)", n)
		}
		fmt.Fprintf(&b, "| %s%s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", row.Name, errs, row.Without.Throughput, row.With.Throughput, share, target, met,
			fmtDur(row.Without.P50), fmtDur(row.With.P50), fmtDur(row.Without.P99), fmtDur(row.With.P99))
	}
	return b.String()
}

// credentialsSection writes section 8 of the document.
func (r *Report) credentialsSection(b *strings.Builder) {
	b.WriteString("## 8. Broker-held credentials\n\n")
	b.WriteString(`Issue 19's overhead rows, run alone with ` + "`go run ./bench/cmd/benchsuite -only credentials`" + `.

One broker process (built from ` + "`./cmd/broker`" + `, with a --config file whose
tenant holds one credential of each kind and has one policy per variant: one
without a credential and one per credential, all else alike) calls a loopback
upstream that reads the body and answers a small JSON body; it verifies no
credential, since what is measured is the broker's cost of applying it on
every attempt. Callers in the suite's process call Execute in a closed loop,
choosing the policy per call; the two variants of a row (the same request
without and with the credential) alternate round by round, so that machine
noise hits them alike. The header credential reads its secret from a file
(value_file, checked for a change at most once a second); the OAuth2
credential's token comes from a loopback token endpoint (a fake: only the
cached path is measured) whose requests are counted, one per broker process
when every measured call used the cached token; the SigV4 row sends a PUT
with a body, signed with a fresh X-Amz-Date on each attempt and the body's
SHA-256 computed once per call, against the same PUT without a credential.
The http_signature rows (RFC 9421, hmac-sha256 and ed25519 over the default
components) are reported without a target.

`)
	b.WriteString(r.CredentialsTable())
	b.WriteString("\n")
}
