package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/admin"
)

// screenshotPath is where UPDATE_SCREENSHOT=1 writes the admin page's
// screenshot, for docs/operations.md.
const screenshotPath = "../../docs/img/admin-gates.png"

// runChromium runs Debian's chromium headless on url with extra flags and
// returns its standard output. It reaches loopback only: names resolve to
// nothing but 127.0.0.1, and every other request goes to a proxy on a
// loopback port where nothing listens (loopback itself bypasses proxies);
// background networking, updates and sync are off, and the profile is a
// temporary directory. Chromium and its children run in a process group
// of their own, killed (by its id) when the run ends or after 90 s.
func runChromium(t *testing.T, url string, extra ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		// Fail, not skip: make test installs it, so a missing browser is a
		// broken set-up, never a reason for the page to go untested.
		t.Fatal("chromium is not installed: run make deps (it installs Debian's package)")
	}
	deadProxy := freePort(t) // bound and closed: nothing listens there
	args := append([]string{
		"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
		"--disable-domain-reliability", "--disable-client-side-phishing-detection", "--no-pings",
		"--metrics-recording-only", "--disable-quic", "--disable-features=OptimizationHints,MediaRouter,Translate",
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--proxy-server=http://" + deadProxy,
		"--user-data-dir=" + t.TempDir(),
	}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any child left behind
	}
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

// TestAdminPageInChromium (issue 21): a real broker closes a gate after a
// 429 with Retry-After: 3600, and its admin page, run in a real headless
// Chromium, shows the gate closed. UPDATE_SCREENSHOT=1 also writes
// docs/img/admin-gates.png.
func TestAdminPageInChromium(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(up.Close)
	adminAddr := freePort(t)
	p := startProc(t, "--allow-destinations", "127.0.0.1/32", "--admin-listen", adminAddr)
	if _, err := p.client.Execute(context.Background(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/v1/things"}}); err != nil {
		t.Fatal(err)
	}
	scope := "host:" + strings.TrimPrefix(up.URL, "http://")

	// The JSON first: the gate is closed for about an hour.
	resp, err := http.Get("http://" + adminAddr + admin.GatesPath + "?tenant=dev&state=closed")
	if err != nil {
		t.Fatal(err)
	}
	var page admin.GatesJSON
	err = json.NewDecoder(resp.Body).Decode(&page)
	_ = resp.Body.Close()
	if err != nil || len(page.Gates) != 1 || page.Gates[0].Scope != scope || page.Gates[0].ClosedUntil == nil ||
		time.Until(*page.Gates[0].ClosedUntil) < 50*time.Minute {
		t.Fatalf("closed gates = %+v (%v), want %s closed for about an hour", page, err, scope)
	}

	url := "http://" + adminAddr + admin.PagePath + "?tenant=dev"
	dom := runChromium(t, url, "--virtual-time-budget=5000", "--dump-dom")
	row := regexp.MustCompile(`(?s)<tr class="closed[ a-z_]*">(.*?)</tr>`).FindSubmatch(dom)
	if row == nil || !bytes.Contains(row[1], []byte("<td>"+scope+"</td>")) || !bytes.Contains(row[1], []byte(`<td class="states">closed`)) {
		t.Fatalf("the page shows no closed row for %s; DOM:\n%s", scope, dom)
	}
	if !bytes.Contains(dom, []byte("1 gate(s)")) {
		t.Errorf("the page does not count one gate; DOM:\n%s", dom)
	}

	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		shot := filepath.Join(t.TempDir(), "admin-gates.png")
		runChromium(t, url, "--virtual-time-budget=5000", "--hide-scrollbars", "--window-size=1280,360", "--screenshot="+shot)
		png, err := os.ReadFile(shot)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(screenshotPath, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", screenshotPath, len(png))
	}
}
