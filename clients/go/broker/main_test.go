package broker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/vectors"
)

// The real-broker tests run the broker command as a separate process: the
// binary in $BROKER_BIN (absolute, or relative to the repository root), or
// one built from ./cmd/broker into a temporary
// directory on first use. Every process listens on a free 127.0.0.1 port
// and is killed when its test (or, for the shared one, the package) ends.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string

	sharedOnce sync.Once
	shared     *brokerProcess
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// brokerBinary returns the path of the broker command, building it once.
func brokerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("BROKER_BIN"); p != "" {
			if !filepath.IsAbs(p) { // relative to the repository root, like the other clients
				vp, err := vectors.Path()
				if err != nil {
					binErr = err
					return
				}
				p = filepath.Join(filepath.Dir(filepath.Dir(vp)), p)
			}
			binPath = p
			return
		}
		binDir, binErr = os.MkdirTemp("", "brokerbin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "broker")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/retrybroker/retrybroker/cmd/broker")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/broker: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// brokerProcess is one running broker command.
type brokerProcess struct {
	target string
	cmd    *exec.Cmd
	log    *proctest.Buffer
	done   chan struct{}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProcess runs the broker with args on a free port and waits until its
// health service reports SERVING.
func startProcess(bin string, args ...string) (*brokerProcess, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &brokerProcess{target: addr, log: &proctest.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--listen", addr, "--log-level", "warn"}, args...)...)
	proctest.DieWithTest(p.cmd)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.waitServing(20 * time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w\nbroker log:\n%s", err, p.log.String())
	}
	return p, nil
}

func (p *brokerProcess) waitServing(timeout time.Duration) error {
	conn, err := grpc.NewClient(p.target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("broker exited (%v) before serving", p.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker not SERVING after %s (last error %v)", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *brokerProcess) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// realBroker returns the shared broker process: the embedded dev tenant,
// allowed to call 127.0.0.1 (httptest upstreams).
func realBroker(t testing.TB) *brokerProcess {
	t.Helper()
	bin := brokerBinary(t)
	sharedOnce.Do(func() {
		shared, sharedErr = startProcess(bin, "--allow-destinations", "127.0.0.1/32")
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// startBrokerProcess starts a broker for one test and kills it at the end.
func startBrokerProcess(t testing.TB, args ...string) *brokerProcess {
	t.Helper()
	p, err := startProcess(brokerBinary(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// repoFile returns the path of a file in the repository's testdata.
func repoFile(t testing.TB, rel string) string {
	t.Helper()
	vp, err := vectors.Path() // <repo>/testdata/classify.jsonl
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(filepath.Dir(vp), rel)
}

// brokerSupportsFlag reports whether the broker command knows flag, from
// its usage text.
func brokerSupportsFlag(t testing.TB, flag string) bool {
	t.Helper()
	out, _ := exec.Command(brokerBinary(t), "--help").CombinedOutput()
	return strings.Contains(string(out), "-"+flag+" ") || strings.Contains(string(out), "-"+flag+"\n")
}
