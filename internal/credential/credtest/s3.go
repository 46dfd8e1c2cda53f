package credtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Bounds on the S3 server's process: every wait is bounded, so that a broken
// server fails the test instead of hanging it.
const (
	s3StartTimeout = 20 * time.Second
)

// S3Region is the region the S3 server signs for.
const S3Region = "us-east-1"

// S3 is a versitygw process (github.com/versity/versitygw, Apache-2.0, its
// posix backend on a temporary directory) listening on a loopback port: an
// S3-compatible server that really verifies AWS Signature Version 4 (the
// signature, the X-Amz-Content-Sha256 payload hash against the body, and
// the signing time against a 15-minute window), with one root account.
type S3 struct {
	// Endpoint is "http://127.0.0.1:PORT" (path-style buckets).
	Endpoint string
	// Addr is the server's host:port.
	Addr string
	// Region is the region it expects in the credential scope.
	Region string
	// AccessKeyID and SecretAccessKey are the root account's keys;
	// AccessKeyFile and SecretKeyFile hold them (no line ending), for an
	// aws_sigv4 credential's access_key_id_file / secret_access_key_file.
	AccessKeyID, SecretAccessKey string
	AccessKeyFile, SecretKeyFile string

	proc
}

// S3Binary returns the path of bin/versitygw in the module's root (built
// by make deps), or versitygw on PATH, or an error that says how to get it.
func S3Binary() (string, error) { return findBinary("versitygw", "") }

// StartS3 starts an S3 server for tb with fresh random root keys and stops
// it at cleanup. It calls tb.Fatal when versitygw is missing (run make
// deps) or does not start.
func StartS3(tb testing.TB) *S3 {
	tb.Helper()
	bin, err := S3Binary()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	s := &S3{Region: S3Region}
	ak, err := randomHex(8)
	if err != nil {
		tb.Fatal(err)
	}
	if s.SecretAccessKey, err = randomHex(20); err != nil {
		tb.Fatal(err)
	}
	s.AccessKeyID, s.SecretAccessKey = "AKIA"+strings.ToUpper(ak), strings.ToUpper(s.SecretAccessKey)
	s.AccessKeyFile = filepath.Join(dir, "access_key_id")
	s.SecretKeyFile = filepath.Join(dir, "secret_access_key")
	for p, v := range map[string]string{s.AccessKeyFile: s.AccessKeyID, s.SecretKeyFile: s.SecretAccessKey} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	root := filepath.Join(dir, "data")
	if err := os.Mkdir(root, 0o700); err != nil {
		tb.Fatal(err)
	}
	var last error
	for range 5 { // a port taken between the probe and the bind: another
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		if last = s.launch(bin, root, port); last == nil {
			break
		}
		if !strings.Contains(s.Logs(), "in use") {
			break
		}
	}
	if last != nil {
		tb.Fatalf("credtest: versitygw: %v", last)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// launch runs versitygw on port and waits until it answers HTTP. The keys
// are passed in its environment, not on its command line.
func (s *S3) launch(bin, root string, port int) error {
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.Endpoint = "http://" + s.Addr
	s.proc = proc{} // a fresh process: this may be another try on a new port
	cmd := exec.Command(bin, "--port", s.Addr, "--region", s.Region, "--quiet", "posix", root)
	cmd.Dir = root
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + root,
		"ROOT_ACCESS_KEY_ID=" + s.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + s.SecretAccessKey,
	}
	if err := s.proc.start("versitygw", cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(s3StartTimeout)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DialContext: LoopbackDial}}
	for {
		resp, err := client.Get(s.Endpoint + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.Header.Get("Server") == "VERSITYGW" {
				return nil
			}
			err = fmt.Errorf("%s answered without Server: VERSITYGW", s.Addr)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited: %s", strings.TrimSpace(s.Logs()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Stop()
			return fmt.Errorf("no answer on %s within %v (%v): %s", s.Addr, s3StartTimeout, err, strings.TrimSpace(s.Logs()))
		}
	}
}

// Client is an HTTP client that dials loopback only.
func (s *S3) Client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: LoopbackDial}}
}

// Do sends one request signed with the root keys by the AWS SDK's signer
// directly (not through package credential), and returns the status and
// body.
func (s *S3) Do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hash, "s3", s.Region, time.Now(), func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = true
	}); err != nil {
		return 0, nil, err
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// CreateBucket creates a bucket, failing tb when the server refuses.
func (s *S3) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	code, body, err := s.Do(http.MethodPut, "/"+name, nil)
	if err != nil || code != http.StatusOK {
		tb.Fatalf("credtest: create bucket %s: %d %v %s", name, code, err, body)
	}
}
