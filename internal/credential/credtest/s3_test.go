package credtest

import (
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// TestS3BinaryMissingSaysMakeDeps: outside the module and with nothing on
// PATH, the error says how to get the server.
func TestS3BinaryMissingSaysMakeDeps(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, err := S3Binary()
	if err == nil || !strings.Contains(err.Error(), "run make deps") {
		t.Fatalf("S3Binary: %v", err)
	}
}

// TestStartS3VerifiesAndStopsByPid: the server refuses an unsigned request
// and accepts a signed one; Stop kills it by its pid, and it is gone.
func TestStartS3VerifiesAndStopsByPid(t *testing.T) {
	s := StartS3(t)
	resp, err := s.Client().Get(s.Endpoint + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned: %d (want 403)", resp.StatusCode)
	}
	s.CreateBucket(t, "bkt")
	if code, body, err := s.Do(http.MethodGet, "/", nil); err != nil || code != http.StatusOK || !strings.Contains(string(body), "<Name>bkt</Name>") {
		t.Fatalf("list buckets: %d %v %s", code, err, body)
	}
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d after Stop: %v (want no such process)", pid, err)
	}
}
