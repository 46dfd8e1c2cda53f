// Package credtest starts real servers that credentials are tested
// against, on loopback ports only: [StartHydra] runs ory/hydra, a real
// OAuth 2.0 server, and [StartS3] versitygw, an S3 server that verifies
// SigV4, each built by "make deps" into bin/ from its pinned module in
// tools/.
//
// Every process is stopped by its own pid at cleanup, with bounded waits,
// and is also killed by the kernel if the test binary dies first (Linux).
// When the binary is missing the test fails (it does not skip): run
// "make deps".
package credtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Bounds on process handling: every wait on hydra is bounded, so that a
// broken server fails the test instead of hanging it.
const (
	// startTimeout bounds how long hydra may take to answer its health
	// check (it migrates its in-memory SQLite first; a loaded machine is
	// slow).
	startTimeout = 60 * time.Second
	// stopTimeout bounds the wait for a killed process to be reaped.
	stopTimeout = 10 * time.Second
	// requestTimeout bounds each admin request the helper makes.
	requestTimeout = 10 * time.Second
)

// HydraScope is the scope the client StartHydra creates may ask for.
const HydraScope = "upstream.read"

// HydraConfig shapes a hydra server.
type HydraConfig struct {
	// AccessTokenTTL is how long its access tokens live (TTL_ACCESS_TOKEN).
	// Default 1h.
	AccessTokenTTL time.Duration
}

// Hydra is one running hydra process ("hydra serve all --dev") with an
// in-memory SQLite database, and one client it knows (client_credentials
// grant, scope HydraScope, client_secret_basic).
type Hydra struct {
	// TokenURL is the public token endpoint.
	TokenURL string
	// IntrospectURL is the admin introspection endpoint (RFC 7662).
	IntrospectURL string
	// AdminURL is the admin API's base URL.
	AdminURL string
	// ClientID and ClientSecret identify the client; ClientSecretFile
	// holds the secret (no line ending).
	ClientID, ClientSecret, ClientSecretFile string

	proc
}

// StartHydra starts hydra for tb, creates its client, and stops it at
// cleanup. It calls tb.Fatal when hydra cannot be found or started.
func StartHydra(tb testing.TB, cfg HydraConfig) *Hydra {
	tb.Helper()
	bin, err := HydraBinary()
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.AccessTokenTTL <= 0 {
		cfg.AccessTokenTTL = time.Hour
	}
	dir := tb.TempDir()
	var h *Hydra
	for range 5 { // ports may be taken between the probe and the bind
		h, err = startHydra(bin, dir, cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		tb.Fatalf("credtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := h.Stop(); err != nil {
			tb.Error(err)
		}
	})
	if err := h.createClient(dir); err != nil {
		tb.Fatalf("credtest: %v\nhydra's output:\n%s", err, h.Logs())
	}
	return h
}

// HydraBinary finds the hydra binary: $HYDRA_BIN, else bin/hydra at the
// module's root, else hydra on PATH, with a message that says how to get
// it.
func HydraBinary() (string, error) { return findBinary("hydra", "HYDRA_BIN") }

func startHydra(bin, dir string, cfg HydraConfig) (*Hydra, error) {
	pub, err := freePort()
	if err != nil {
		return nil, err
	}
	adm, err := freePort()
	if err != nil {
		return nil, err
	}
	if adm == pub {
		return nil, errors.New("address already in use: the same free port twice")
	}
	system, err := randomHex(24)
	if err != nil {
		return nil, err
	}
	issuer := "http://127.0.0.1:" + strconv.Itoa(pub) + "/"
	h := &Hydra{
		TokenURL:      issuer + "oauth2/token",
		AdminURL:      "http://127.0.0.1:" + strconv.Itoa(adm),
		IntrospectURL: "http://127.0.0.1:" + strconv.Itoa(adm) + "/admin/oauth2/introspect",
	}
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + dir,
		"DSN=memory",
		"URLS_SELF_ISSUER=" + issuer,
		"SERVE_PUBLIC_HOST=127.0.0.1",
		"SERVE_PUBLIC_PORT=" + strconv.Itoa(pub),
		"SERVE_ADMIN_HOST=127.0.0.1",
		"SERVE_ADMIN_PORT=" + strconv.Itoa(adm),
		"SECRETS_SYSTEM=" + system,
		"TTL_ACCESS_TOKEN=" + cfg.AccessTokenTTL.String(),
		"STRATEGIES_ACCESS_TOKEN=opaque",
		"LOG_LEVEL=warn",
		"LOG_LEAK_SENSITIVE_VALUES=false",
		"SQA_OPT_OUT=true",
		// Safety net: anything hydra would send beyond loopback goes to a
		// closed loopback port instead (Go's ProxyFromEnvironment), so no
		// test traffic ever leaves the machine.
		"HTTP_PROXY=http://127.0.0.1:9",
		"HTTPS_PROXY=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost,::1",
	}
	if err := h.start("hydra", cmd); err != nil {
		return nil, err
	}

	deadline := time.Now().Add(startTimeout)
	for {
		if h.ready() == nil {
			return h, nil
		}
		select {
		case <-h.exited:
			return nil, fmt.Errorf("hydra exited before it was ready: %s", strings.TrimSpace(h.out.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			logs := h.out.String()
			_ = h.Stop()
			return nil, fmt.Errorf("hydra did not answer within %v: %s", startTimeout, strings.TrimSpace(logs))
		}
	}
}

// ready asks both listeners' health checks.
func (h *Hydra) ready() error {
	for _, u := range []string{h.AdminURL + "/health/ready", strings.TrimSuffix(h.TokenURL, "oauth2/token") + "health/ready"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := loopbackClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", u, resp.Status)
			}
		}
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// createClient creates the client with the admin API and writes its
// secret to dir/client_secret.
func (h *Hydra) createClient(dir string) error {
	body, _ := json.Marshal(map[string]any{
		"client_name":                "retrybroker-test",
		"grant_types":                []string{"client_credentials"},
		"response_types":             []string{"token"},
		"scope":                      HydraScope,
		"token_endpoint_auth_method": "client_secret_basic",
		"access_token_strategy":      "opaque",
	})
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := h.admin(http.MethodPost, "/admin/clients", "application/json", body, http.StatusCreated, &out); err != nil {
		return fmt.Errorf("create the client: %w", err)
	}
	if out.ClientID == "" || out.ClientSecret == "" {
		return errors.New("create the client: no client_id or client_secret in the answer")
	}
	h.ClientID, h.ClientSecret = out.ClientID, out.ClientSecret
	h.ClientSecretFile = filepath.Join(dir, "client_secret")
	return os.WriteFile(h.ClientSecretFile, []byte(out.ClientSecret), 0o600)
}

// Introspection is what hydra says of a token (RFC 7662).
type Introspection struct {
	Active   bool   `json:"active"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	Exp      int64  `json:"exp"`
}

// Introspect asks hydra's admin API about token.
func (h *Hydra) Introspect(token string) (Introspection, error) {
	var in Introspection
	form := url.Values{"token": {token}}.Encode()
	err := h.admin(http.MethodPost, "/admin/oauth2/introspect", "application/x-www-form-urlencoded", []byte(form), http.StatusOK, &in)
	return in, err
}

// Revoke revokes token (RFC 7009) at the public revocation endpoint, as
// the client: hydra then says it is inactive.
func (h *Hydra) Revoke(token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	u := strings.TrimSuffix(h.TokenURL, "token") + "revoke"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(h.ClientID), url.QueryEscape(h.ClientSecret))
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke: %s: %s", resp.Status, b)
	}
	return nil
}

// admin sends one admin API request and decodes its JSON answer into out.
func (h *Hydra) admin(method, path, contentType string, body []byte, want int, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.AdminURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// loopbackClient dials loopback addresses only, whatever a URL says.
var loopbackClient = &http.Client{
	Transport: &http.Transport{
		Proxy:       nil,
		DialContext: LoopbackDial,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       requestTimeout,
}

// LoopbackClient returns an HTTP client that dials loopback IP addresses
// only and follows no redirect, as Deps.TokenClient's would.
func LoopbackClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{Proxy: nil, DialContext: LoopbackDial, MaxIdleConnsPerHost: 64},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
