package suite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a suite that starts a
// redis-server, prints its pid and waits to be killed.
const helperEnv = "BENCHSUITE_PDEATHSIG_HELPER_DIR"

// TestChildrenDieWithTheSuite kills (SIGKILL) a process that started a
// redis-server the way the suite starts every child (startProcess, as for
// brokers), and checks that the kernel kills the server too.
func TestChildrenDieWithTheSuite(t *testing.T) {
	if dir := os.Getenv(helperEnv); dir != "" {
		runHelperSuite(dir)
		return
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found on PATH: run make redis (or apt-get install -y redis-server)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithTheSuite$", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), helperEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pidc := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "redis-server pid "); ok {
				if n, err := strconv.Atoi(v); err == nil {
					pidc <- n
					return
				}
			}
		}
		close(pidc)
	}()
	var pid int
	select {
	case p, ok := <-pidc:
		if !ok {
			t.Fatal("the helper exited without starting redis-server")
		}
		pid = p
	case <-time.After(20 * time.Second):
		t.Fatal("the helper did not start redis-server within 20 s")
	}
	// If the kernel fails to, the test stops the server by its pid.
	t.Cleanup(func() {
		if isRedisServer(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !isRedisServer(pid) {
		t.Fatalf("pid %d is not a running redis-server", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for isRedisServer(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server pid %d still runs 10 s after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runHelperSuite starts a redis-server as the suite does, prints its pid
// and waits (at most 30 s) to be killed.
func runHelperSuite(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := startRedis(ctx, "", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	fmt.Printf("redis-server pid %d\n", rs.pid())
	<-ctx.Done()
	rs.stop(time.Second)
	os.Exit(3)
}

// isRedisServer reports whether pid is a live (not zombie) redis-server.
func isRedisServer(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X' {
		return false
	}
	return strings.Contains(s[:i], "redis-server")
}
