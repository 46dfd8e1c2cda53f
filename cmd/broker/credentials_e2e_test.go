package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/admin"
)

const credTenantKey = "cred-tenant-key"

// headerUpstream is a loopback upstream that records the headers of every
// request and answers with status (200 by default).
type headerUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	status  int
}

func newHeaderUpstream(t *testing.T) *headerUpstream {
	t.Helper()
	u := &headerUpstream{status: http.StatusOK}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		code := u.status
		u.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(u.Close)
	return u
}

// last returns header name of the last request ("" before any).
func (u *headerUpstream) last(name string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.headers) == 0 {
		return ""
	}
	return u.headers[len(u.headers)-1].Get(name)
}

func (u *headerUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.headers)
}

// writeFileAtomic writes content to path through a rename, as an editor or
// a secret manager does.
func writeFileAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// credBrokerConfig is a one-tenant configuration whose credentials section
// is creds (indented under the tenant) and whose policies are policies.
func credBrokerConfig(creds, policies string) string {
	return "version: 1\ntenants:\n  - id: t1\n    api_key_sha256: [" + keyHash(credTenantKey) + "]\n" +
		"    credentials:\n" + creds + "    policies:\n" + policies
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *brokerProc) executeCred(t *testing.T, policy, url string, headers ...string) (*rbv1.ExecuteResponse, error) {
	t.Helper()
	req := &rbv1.HttpRequest{Method: "GET", Url: url}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Headers = append(req.Headers, &rbv1.HttpHeader{Name: headers[i], Value: headers[i+1]})
	}
	return p.client.Execute(withKey(t.Context(), credTenantKey), &rbv1.ExecuteRequest{Request: req, Policy: policy})
}

// metricsText returns the broker's /metrics.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	return httpText(t, "http://"+addr+"/metrics")
}

func httpText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitUntil polls cond every 20ms until it holds, for at most within, and
// returns how long it took; it fails the test when cond never holds.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, within)
	return 0
}

// TestHeaderCredentialEndToEnd: a header credential from a file reaches the
// upstream as Authorization: Bearer <secret>; a caller that sends
// Authorization is refused (INVALID_ARGUMENT naming the header and the
// credential), unless the credential says overwrite, when the broker's
// value wins; a rewritten file is used by the next call within 2 s (file
// check every 1 s) and counted; a removed file keeps the last good value
// in use, counted as a failed reload.
func TestHeaderCredentialEndToEnd(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	writeFileAtomic(t, secret, "tok-A\n")
	up := newHeaderUpstream(t)
	cfg := writeConfig(t, credBrokerConfig(
		"      api: {kind: header, name: authorization, prefix: \"Bearer \", value_file: "+secret+"}\n"+
			"      api2: {kind: header, name: Authorization, prefix: \"Bearer \", value_file: "+secret+", overwrite: true}\n",
		"      default: {credential: api, allow_destinations: [\"127.0.0.1/32\"]}\n"+
			"      over: {credential: api2, allow_destinations: [\"127.0.0.1/32\"]}\n"))
	metricsAddr := freePort(t)
	p := startProc(t, "--config", cfg, "--metrics-listen", metricsAddr)

	res, err := p.executeCred(t, "", up.URL+"/a")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("execute: %v %v", err, res.GetOutcome())
	}
	if got := up.last("Authorization"); got != "Bearer tok-A" {
		t.Fatalf("upstream saw Authorization %q, want the file's secret", got)
	}

	n := up.count()
	_, err = p.executeCred(t, "", up.URL+"/a", "AUTHORIZATION", "Bearer caller-own")
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "Authorization") || !strings.Contains(msg, `"api"`) || strings.Contains(msg, "caller-own") || strings.Contains(msg, "tok-A") {
		t.Fatalf("caller's Authorization: %v; want INVALID_ARGUMENT naming the header and the credential, no value", err)
	}
	if up.count() != n {
		t.Fatal("the refused call was sent")
	}
	if _, err := p.executeCred(t, "over", up.URL+"/a", "Authorization", "Bearer caller-own"); err != nil {
		t.Fatal(err)
	}
	if got := up.last("Authorization"); got != "Bearer tok-A" {
		t.Fatalf("with overwrite the upstream saw %q, want the broker's value", got)
	}

	// Rotation: the next call uses the new value within 2 s.
	writeFileAtomic(t, secret, "tok-B\n")
	took := waitUntil(t, 10*time.Second, "rotated secret in use", func() bool {
		_, err := p.executeCred(t, "", up.URL+"/a")
		return err == nil && up.last("Authorization") == "Bearer tok-B"
	})
	if took > 2*time.Second+500*time.Millisecond {
		t.Errorf("the rotated secret took %v to be used, want within about 2s (a check every 1s)", took)
	}
	t.Logf("rotated secret used after %v", took)
	reload := `retrybroker_credential_file_reloads_total{credential="api",result="ok",tenant="t1"}`
	if m := metricsText(t, metricsAddr); !strings.Contains(m, reload) {
		t.Fatalf("metrics lack %s", reload)
	}

	// Removed: the last good value stays in use; the failure is counted.
	if err := os.Remove(secret); err != nil {
		t.Fatal(err)
	}
	failed := `retrybroker_credential_file_reloads_total{credential="api",result="error",tenant="t1"}`
	waitUntil(t, 10*time.Second, "failed reload counted", func() bool {
		_, _ = p.executeCred(t, "", up.URL+"/a")
		return strings.Contains(metricsText(t, metricsAddr), failed)
	})
	res, err = p.executeCred(t, "", up.URL+"/a")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || up.last("Authorization") != "Bearer tok-B" {
		t.Fatalf("with the file gone: %v %v, upstream saw %q; want the last good value", err, res.GetOutcome(), up.last("Authorization"))
	}
	if strings.Contains(p.logs.String(), "tok-A") || strings.Contains(p.logs.String(), "tok-B") {
		t.Fatal("a secret reached the logs")
	}
}

// TestCredentialKubernetesSecretMount: a Secret volume's layout (key ->
// ..data/key, ..data -> ..2026_x) and its update (a new ..2026_y, and
// ..data swapped to it by renaming a new symlink over it) is seen by the
// next call.
func TestCredentialKubernetesSecretMount(t *testing.T) {
	dir := t.TempDir()
	version := func(name, value string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "key"), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01", "k8s-A")
	if err := os.Symlink("..2026_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/key", filepath.Join(dir, "key")); err != nil {
		t.Fatal(err)
	}
	up := newHeaderUpstream(t)
	cfg := writeConfig(t, credBrokerConfig(
		"      api: {kind: header, name: X-Api-Key, value_file: "+filepath.Join(dir, "key")+"}\n",
		"      default: {credential: api, allow_destinations: [\"127.0.0.1/32\"]}\n"))
	p := startProc(t, "--config", cfg)
	if _, err := p.executeCred(t, "", up.URL); err != nil || up.last("X-Api-Key") != "k8s-A" {
		t.Fatalf("%v: upstream saw %q", err, up.last("X-Api-Key"))
	}
	version("..2026_02", "k8s-B")
	if err := os.Symlink("..2026_02", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01")); err != nil { // as the kubelet does
		t.Fatal(err)
	}
	took := waitUntil(t, 10*time.Second, "swapped secret in use", func() bool {
		_, err := p.executeCred(t, "", up.URL)
		return err == nil && up.last("X-Api-Key") == "k8s-B"
	})
	t.Logf("swapped ..data used after %v", took)
}

// TestCredentialFileGoneAtLoad: a credential whose file does not exist is
// a configuration error, at start and in config check, naming the path.
func TestCredentialFileGoneAtLoad(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "no-such-token")
	cfg := writeConfig(t, credBrokerConfig(
		"      api: {kind: header, name: Authorization, value_file: "+gone+"}\n",
		"      default: {credential: api}\n"))
	out, err := exec.Command(brokerBin, "config", "check", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), gone) || !strings.Contains(string(out), "tenants[0].credentials.api") {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	out, err = exec.Command(brokerBin, "--listen", freePort(t), "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), gone) {
		t.Fatalf("start: %v\n%s", err, out)
	}
}

// TestCredentialGatesPerCredentialEndToEnd: two policies with different
// credentials to the same host have separate gates: a 429 with
// Retry-After under one closes its gate only.
func TestCredentialGatesPerCredentialEndToEnd(t *testing.T) {
	dir := t.TempDir()
	writeFileAtomic(t, filepath.Join(dir, "a"), "key-a")
	writeFileAtomic(t, filepath.Join(dir, "b"), "key-b")
	var mu sync.Mutex
	seen := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Api-Key")]++
		mu.Unlock()
		if r.Header.Get("X-Api-Key") == "key-a" {
			w.Header().Set("Retry-After", "600")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	cfg := writeConfig(t, credBrokerConfig(
		"      a: {kind: header, name: X-Api-Key, value_file: "+filepath.Join(dir, "a")+"}\n"+
			"      b: {kind: header, name: X-Api-Key, value_file: "+filepath.Join(dir, "b")+"}\n",
		"      default: {credential: a, max_delay: 1s, allow_destinations: [\"127.0.0.1/32\"]}\n"+
			"      other: {credential: b, max_delay: 1s, allow_destinations: [\"127.0.0.1/32\"]}\n"))
	p := startProc(t, "--config", cfg)
	if res, err := p.executeCred(t, "", up.URL); err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
		t.Fatalf("a: %v %v", err, res.GetOutcome())
	}
	if res, err := p.executeCred(t, "", up.URL); err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED {
		t.Fatalf("a again: %v %v, want its gate closed", err, res.GetOutcome())
	}
	if res, err := p.executeCred(t, "other", up.URL); err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("b: %v %v, want b's own gate open", err, res.GetOutcome())
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["key-a"] != 1 || seen["key-b"] != 1 {
		t.Fatalf("upstream saw %v", seen)
	}
}

// leakKind is one credential kind for the secret grep test: its
// credentials section (secret files under dir) and the secret values that
// must never appear anywhere but on the upstream's first hop.
type leakKind struct {
	kind  string
	creds func(t *testing.T, dir string) (yaml string, secrets []string)
	// unavailable, when set, makes the credential unavailable (its calls
	// end with OUTCOME_CREDENTIALS_UNAVAILABLE) without changing which
	// secrets must not leak.
	unavailable func(dir string)
	// set is a header the credential sets (a caller sending it is refused).
	set string
}

// leakKinds lists the kinds the secret grep test runs, each credential
// named api.
var leakKinds = []leakKind{
	{"header", func(_ *testing.T, dir string) (string, []string) {
		const v = "LEAK-MARKER-hdr-7f3a91"
		writeFileAtomicNoT(filepath.Join(dir, "hdr"), v+"\n")
		// A header no default list strips: only the credential's own
		// Headers keep it off the other origin.
		return "      api: {kind: header, name: X-Vendor-Token, value_file: " + filepath.Join(dir, "hdr") + "}\n", []string{v}
	}, func(dir string) {
		// The secret with a control character: no header value.
		writeFileAtomicNoT(filepath.Join(dir, "hdr"), "LEAK-MARKER-hdr-7f3a91\x01\n")
	}, "X-Vendor-Token"},
	{"oauth2_client_credentials", func(t *testing.T, dir string) (string, []string) {
		const secret, token = "LEAK-MARKER-oa-client-5c2e", "LEAK-MARKER-oa-token-91d0"
		writeFileAtomicNoT(filepath.Join(dir, "client"), secret+"\n")
		// A loopback token endpoint; it alone may see the client secret.
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600}`)
		}))
		t.Cleanup(ts.Close)
		// The token travels to the first origin only (Authorization):
		// it is grepped everywhere else.
		return "      api: {kind: oauth2_client_credentials, token_url: " + ts.URL + "/token, client_id: broker, client_secret_file: " +
			filepath.Join(dir, "client") + ", allow_destinations: [\"127.0.0.1/32\"]}\n", []string{secret, token}
	}, nil, "Authorization"},
	{"aws_sigv4", func(_ *testing.T, dir string) (string, []string) {
		const secret, session = "LEAK-MARKER-aws-secret-3b7f", "LEAK-MARKER-aws-session-0a4c"
		writeFileAtomicNoT(filepath.Join(dir, "akid"), "AKIDLEAKTEST\n")
		writeFileAtomicNoT(filepath.Join(dir, "secret"), secret+"\n")
		writeFileAtomicNoT(filepath.Join(dir, "session"), session+"\n")
		// The secret key never travels; the session token goes to the
		// first origin only (X-Amz-Security-Token).
		return "      api: {kind: aws_sigv4, region: eu-west-1, service: execute-api, access_key_id_file: " + filepath.Join(dir, "akid") +
			", secret_access_key_file: " + filepath.Join(dir, "secret") + ", session_token_file: " + filepath.Join(dir, "session") + "}\n", []string{secret, session}
	}, nil, "X-Amz-Date"},
	{"http_signature", func(_ *testing.T, dir string) (string, []string) {
		const key = "LEAK-MARKER-hmac-key-6e18-0123456789abcdef"
		writeFileAtomicNoT(filepath.Join(dir, "hmac"), key)
		// The key never travels.
		return "      api: {kind: http_signature, algorithm: hmac-sha256, key_id: k1, key_file: " + filepath.Join(dir, "hmac") + "}\n", []string{key}
	}, nil, "Signature"},
}

func writeFileAtomicNoT(path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		panic(err)
	}
}

// otlpCollector is a loopback OTLP/HTTP endpoint that keeps every export's
// raw bytes (protobuf keeps strings as they are, so a secret in a span
// would show).
type otlpCollector struct {
	*httptest.Server
	mu   sync.Mutex
	body []byte
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.body = append(c.body, b...)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *otlpCollector) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.body)
}

// TestCredentialSecretsNeverLeak: for every kind in leakKinds, a broker
// with debug logs and OTLP span export makes successful, refused and failed
// calls and follows a redirect to another origin; the secret appears in
// none of the logs, the exported spans, /metrics, /health/credentials,
// the admin views, the error messages and attempt records, the output of
// config check, or anything the second origin received (which also gets
// no Referer).
func TestCredentialSecretsNeverLeak(t *testing.T) {
	for _, k := range leakKinds {
		t.Run(k.kind, func(t *testing.T) {
			dir := t.TempDir()
			creds, secrets := k.creds(t, dir)
			var mu sync.Mutex
			var second []string // everything the other origin received
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				second = append(second, fmt.Sprintf("%s %s %v %s", r.Method, r.URL, r.Header, b))
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(other.Close)
			first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/redirect":
					http.Redirect(w, r, other.URL+"/landed?from=first", http.StatusFound)
				case "/fail":
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, "upstream error")
				default:
					w.WriteHeader(http.StatusOK)
				}
			}))
			t.Cleanup(first.Close)
			cfg := writeConfig(t, credBrokerConfig(creds,
				"      default: {credential: api, max_redirects: 2, max_retries: 1, backoff: {base: 1ms, cap: 1ms}, allow_destinations: [\"127.0.0.1/32\"]}\n"))
			col := newOTLPCollector(t)
			metricsAddr := freePort(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
			adminAddr := freePort(t)
			p := startProc(t, "--config", cfg, "--metrics-listen", metricsAddr, "--admin-listen", adminAddr, "--log-level", "debug")

			var seen strings.Builder // every answer and error the caller got
			record := func(res *rbv1.ExecuteResponse, err error) {
				fmt.Fprintf(&seen, "%v\n%v\n", res, err)
			}
			record(p.executeCred(t, "", first.URL+"/ok"))
			record(p.executeCred(t, "", first.URL+"/fail"))
			record(p.executeCred(t, "", first.URL+"/redirect"))
			record(p.executeCred(t, "", "http://"+freePort(t)+"/refused"))
			record(p.executeCred(t, "", first.URL+"/ok", k.set, "caller"))
			out, err := exec.Command(brokerBin, "config", "check", cfg).CombinedOutput()
			if err != nil {
				t.Fatalf("config check: %v\n%s", err, out)
			}
			if k.unavailable != nil {
				k.unavailable(dir)
				waitUntil(t, 10*time.Second, "credential unavailable", func() bool {
					res, err := p.executeCred(t, "", first.URL+"/ok")
					record(res, err)
					return err == nil && res.GetOutcome() == rbv1.Outcome_OUTCOME_CREDENTIALS_UNAVAILABLE
				})
			}
			mu.Lock()
			landed := len(second)
			mu.Unlock()
			if landed != 1 {
				t.Fatalf("the other origin received %d requests, want the redirect's 1", landed)
			}
			waitUntil(t, 15*time.Second, "spans exported", func() bool { return strings.Contains(col.text(), "retrybroker") })

			mu.Lock()
			sources := map[string]string{
				"logs":                p.logs.String(),
				"spans":               col.text(),
				"metrics":             metricsText(t, metricsAddr),
				"health/credentials":  httpText(t, "http://"+metricsAddr+CredentialsHealthPath),
				"health/shared-state": httpText(t, "http://"+metricsAddr+SharedStateHealthPath),
				"admin gate":          httpText(t, "http://"+adminAddr+AdminGatePath+"?tenant=t1&host="+strings.TrimPrefix(first.URL, "http://")+"&credential=cred:api"),
				"admin gates":         httpText(t, "http://"+adminAddr+admin.GatesPath+"?tenant=t1"),
				"admin catalog":       httpText(t, "http://"+adminAddr+admin.CatalogPath+"?tenant=t1"),
				"admin page":          httpText(t, "http://"+adminAddr+admin.PagePath),
				"responses":           seen.String(),
				"config check":        string(out),
				"other origin":        strings.Join(second, "\n"),
			}
			mu.Unlock()
			// The admin views grepped are the credential's own gate, not an
			// empty answer.
			if g := sources["admin gates"]; !strings.Contains(strings.ReplaceAll(g, " ", ""), `"credential":"api"`) {
				t.Errorf("the admin listing does not show the credential's gate: %s", g)
			}
			for where, text := range sources {
				for _, s := range secrets {
					if strings.Contains(text, s) {
						t.Errorf("the secret appears in %s", where)
					}
				}
			}
			if strings.Contains(strings.ToLower(sources["other origin"]), "referer") {
				t.Errorf("the other origin received a Referer: %s", sources["other origin"])
			}
			if k.unavailable != nil && !strings.Contains(sources["health/credentials"], `"status":"unavailable"`) {
				t.Errorf("health does not list the unavailable credential: %s", sources["health/credentials"])
			}
			if !strings.Contains(sources["responses"], "OUTCOME_SUCCESS") || !strings.Contains(sources["responses"], "InvalidArgument") {
				t.Fatalf("the calls did not run as planned:\n%s", sources["responses"])
			}
		})
	}
}

// TestCredentialUnavailableEndToEnd: a secret file rewritten with a value
// that cannot be a header value makes the credential unavailable: the call
// ends with OUTCOME_CREDENTIALS_UNAVAILABLE before anything is sent, the
// attempt's error names the credential and the cause, the metric counts
// it, and /health/credentials says so until a good value is back.
func TestCredentialUnavailableEndToEnd(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	writeFileAtomic(t, secret, "good-value\n")
	up := newHeaderUpstream(t)
	cfg := writeConfig(t, credBrokerConfig(
		"      api: {kind: header, name: X-Api-Key, value_file: "+secret+"}\n",
		"      default: {credential: api, allow_destinations: [\"127.0.0.1/32\"]}\n"))
	metricsAddr := freePort(t)
	p := startProc(t, "--config", cfg, "--metrics-listen", metricsAddr)
	if _, err := p.executeCred(t, "", up.URL); err != nil || up.count() != 1 {
		t.Fatalf("%v, upstream saw %d", err, up.count())
	}
	writeFileAtomic(t, secret, "bad\x01value\n")
	var res *rbv1.ExecuteResponse
	waitUntil(t, 10*time.Second, "credentials unavailable", func() bool {
		var err error
		res, err = p.executeCred(t, "", up.URL)
		return err == nil && res.GetOutcome() == rbv1.Outcome_OUTCOME_CREDENTIALS_UNAVAILABLE
	})
	sent := up.count()
	res, err := p.executeCred(t, "", up.URL)
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_CREDENTIALS_UNAVAILABLE || up.count() != sent {
		t.Fatalf("%v %v, upstream saw %d (was %d): want nothing sent", err, res.GetOutcome(), up.count(), sent)
	}
	a := res.GetAttempts()
	if len(a) != 1 || a[0].GetDecision().GetReason() != rbv1.Reason_REASON_CREDENTIALS_UNAVAILABLE || a[0].GetStatusCode() != 0 ||
		!strings.Contains(a[0].GetErrorMessage(), "credential api unavailable") || strings.Contains(a[0].GetErrorMessage(), "bad") {
		t.Fatalf("attempts %v", a)
	}
	if m := metricsText(t, metricsAddr); !strings.Contains(m, `retrybroker_credential_unavailable_total{credential="api",tenant="t1"}`) {
		t.Fatal("metrics lack the unavailable count")
	}
	health := httpText(t, "http://"+metricsAddr+CredentialsHealthPath)
	if !strings.Contains(health, `"status":"unavailable"`) || !strings.Contains(health, `"credential":"api"`) || strings.Contains(health, "bad") {
		t.Fatalf("health: %s", health)
	}
	writeFileAtomic(t, secret, "good-again\n")
	waitUntil(t, 10*time.Second, "credential back", func() bool {
		res, err := p.executeCred(t, "", up.URL)
		return err == nil && res.GetOutcome() == rbv1.Outcome_OUTCOME_SUCCESS && up.last("X-Api-Key") == "good-again"
	})
	if health := httpText(t, "http://"+metricsAddr+CredentialsHealthPath); !strings.Contains(health, `"status":"ok"`) {
		t.Fatalf("health after recovery: %s", health)
	}
}

// TestCredentialReloadKeepsLastGood: a reload whose credential names a file
// that does not exist fails (logged, naming the path) and keeps the last
// good configuration, credential included.
func TestCredentialReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	writeFileAtomic(t, secret, "kept-value\n")
	up := newHeaderUpstream(t)
	good := credBrokerConfig("      api: {kind: header, name: X-Api-Key, value_file: "+secret+"}\n",
		"      default: {credential: api, allow_destinations: [\"127.0.0.1/32\"]}\n")
	cfg := writeConfig(t, good)
	p := startProc(t, "--config", cfg)
	gone := filepath.Join(dir, "missing-token")
	writeFileAtomic(t, cfg, strings.ReplaceAll(good, secret, gone))
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "reload failure logged", func() bool { return strings.Contains(p.logs.String(), gone) })
	if _, err := p.executeCred(t, "", up.URL); err != nil || up.last("X-Api-Key") != "kept-value" {
		t.Fatalf("after the failed reload: %v, upstream saw %q", err, up.last("X-Api-Key"))
	}
	if strings.Contains(p.logs.String(), "kept-value") {
		t.Fatal("the secret reached the logs")
	}
}
