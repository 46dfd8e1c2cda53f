package deploy_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// maxImageBytes is the image's size target.
const maxImageBytes = 40 << 20

// imageFiles is everything the image may hold.
var imageFiles = []string{
	"broker",
	"etc/",
	"etc/group",
	"etc/passwd",
	"etc/ssl/",
	"etc/ssl/certs/",
	"etc/ssl/certs/ca-certificates.crt",
}

// containerEngine returns podman, or docker when its daemon answers.
func containerEngine(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("podman"); err == nil {
		return p
	}
	if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "info").Run() == nil {
		return p
	}
	t.Fatal("neither podman nor a working docker: make image installs podman")
	return ""
}

// TestImage inspects the image make image built (its name in
// $RETRYBROKER_IMAGE_TEST; make image-test sets it): a non-root numeric
// user, the OCI labels, at most 40 MB; exports the filesystem of a created
// (never started: containers cannot run here) container and checks it
// holds only the binary, the CA certificates and passwd/group; then runs
// the binary from that filesystem on loopback and checks that it serves
// gRPC health.
func TestImage(t *testing.T) {
	image := os.Getenv("RETRYBROKER_IMAGE_TEST")
	if image == "" {
		t.Skip("set RETRYBROKER_IMAGE_TEST=IMAGE (make image-test builds the image and runs this test)")
	}
	engine := containerEngine(t)

	var inspect []struct {
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal(run(t, engine, "image", "inspect", image), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("image inspect: %v (%d images)", err, len(inspect))
	}
	img := inspect[0]
	t.Logf("image %s: %d bytes, user %s, labels %v", image, img.Size, img.Config.User, img.Config.Labels)
	if img.Size <= 0 || img.Size > maxImageBytes {
		t.Errorf("image size %d bytes, want at most %d", img.Size, maxImageBytes)
	}
	if img.Config.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", img.Config.User)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{"/broker"}) {
		t.Errorf("entrypoint %v", img.Config.Entrypoint)
	}
	for _, k := range []string{"version", "source", "revision"} {
		if img.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("label org.opencontainers.image.%s missing", k)
		}
	}

	cid := strings.TrimSpace(string(run(t, engine, "create", image)))
	t.Cleanup(func() { _ = exec.Command(engine, "rm", "-f", cid).Run() })
	fs := run(t, engine, "export", cid)
	dir := t.TempDir()
	var names []string
	tr := tar.NewReader(bytes.NewReader(fs))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		if name == "" || name == "/" {
			continue
		}
		names = append(names, name)
		if h.Typeflag == tar.TypeReg {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)&0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, imageFiles) {
		t.Errorf("the image holds %v, want exactly %v", names, imageFiles)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65532:65532:") || strings.Contains(string(passwd), ":0:") {
		t.Errorf("etc/passwd %q (%v): want user 65532 and no root", passwd, err)
	}

	bin := filepath.Join(dir, "broker")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked")
		}
	}
	_ = f.Close()
	v := string(run(t, bin, "version"))
	if want := img.Config.Labels["org.opencontainers.image.version"]; !strings.Contains(v, "broker "+want+" ") {
		t.Errorf("broker version printed %q, want the label's version %q", v, want)
	}

	addr := freeAddr(t)
	cmd := exec.Command(bin, "--listen", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, healthpb.NewHealthClient(conn), done, 30*time.Second)
}
