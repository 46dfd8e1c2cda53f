package suite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// Every process and listener of the suite is on loopback.
const loopback = "127.0.0.1"

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is the environment for child processes: ours without anything
// that could send traffic elsewhere (OTLP export, proxies) or change the
// broker's store (BROKER_*).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		uk := strings.ToUpper(k)
		if strings.HasPrefix(uk, "OTEL_") || strings.HasPrefix(uk, "BROKER_") || strings.HasSuffix(uk, "_PROXY") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none")
}

// tailBuffer keeps the last bytes written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// process is a child process with its stderr kept.
type process struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	exited chan struct{}
	err    error // valid after exited is closed
}

// startProcess starts bin with args and the clean environment. The child
// is killed by the kernel if the suite dies first (Linux); otherwise the
// caller stops it by its pid (stop).
func startProcess(bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	setParentDeathSignal(cmd)
	p := &process{cmd: cmd, out: &tailBuffer{max: 64 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// rssBytes reads VmRSS (resident set) of the process from /proc.
func (p *process) rssBytes() (int64, error) { return p.procStatus("VmRSS:") }

// peakRSSBytes reads VmHWM (peak resident set) of the process from /proc.
func (p *process) peakRSSBytes() (int64, error) { return p.procStatus("VmHWM:") }

func (p *process) procStatus(field string) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid()), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// brokerOptions are the flags of one broker process.
type brokerOptions struct {
	// One of redisURL (--redis), redisCluster (--redis-cluster seeds,
	// ADDR,ADDR,...) and redisSentinel (--redis-sentinel MASTER@ADDR,...),
	// or none for the memory store.
	redisURL      string
	redisCluster  string
	redisSentinel string
	metrics       bool
	// localAdmission is --redis-local-admission ("" for the default).
	localAdmission string
	// config is a --config file; the dev tenant's --allow-destinations is
	// then not passed.
	config string
	// listen is the address to listen on (a replica started again where
	// it was); "" picks a free loopback port.
	listen string
	// healthInterval is --redis-health-interval ("" for the default).
	healthInterval string
	// extra are further flags, appended as given (e.g. --tasks-sqlite PATH).
	extra []string
}

// broker is a running broker process.
type broker struct {
	*process
	addr        string
	metricsAddr string
	// startup is the time from starting the process to its first SERVING
	// health answer.
	startup time.Duration
	// scrape keeps one connection to the metrics endpoint, so that
	// scraping adds a constant number of goroutines to the broker.
	scrape *http.Client
}

// startBroker runs the broker binary on a free loopback port with the dev
// tenant allowed to call 127.0.0.1, and waits until its health service
// answers SERVING.
func startBroker(ctx context.Context, bin string, o brokerOptions) (*broker, error) {
	var lastErr error
	for range 5 { // a free port can be taken between probe and bind: retry
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		b := &broker{addr: net.JoinHostPort(loopback, strconv.Itoa(port))}
		if o.listen != "" {
			b.addr = o.listen
		}
		args := []string{"--listen", b.addr, "--log-level", "warn", "--shutdown-timeout", "2s"}
		if o.config != "" {
			args = append(args, "--config", o.config)
		} else {
			args = append(args, "--allow-destinations", "127.0.0.1/32")
		}
		if o.metrics {
			mport, err := freePort()
			if err != nil {
				return nil, err
			}
			b.metricsAddr = net.JoinHostPort(loopback, strconv.Itoa(mport))
			args = append(args, "--metrics-listen", b.metricsAddr)
		}
		switch {
		case o.redisURL != "":
			args = append(args, "--redis", o.redisURL)
		case o.redisCluster != "":
			args = append(args, "--redis-cluster", o.redisCluster)
		case o.redisSentinel != "":
			args = append(args, "--redis-sentinel", o.redisSentinel)
		}
		if o.localAdmission != "" {
			args = append(args, "--redis-local-admission", o.localAdmission)
		}
		if o.healthInterval != "" {
			args = append(args, "--redis-health-interval", o.healthInterval)
		}
		args = append(args, o.extra...)
		t0 := time.Now()
		b.process, err = startProcess(bin, args...)
		if err != nil {
			return nil, fmt.Errorf("start broker: %w", err)
		}
		if lastErr = b.waitReady(ctx); lastErr == nil {
			b.startup = time.Since(t0)
			return b, nil
		}
		b.stop(time.Second)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// waitReady polls the health service ("" and the shared-state service)
// until both answer SERVING, for at most 20 seconds.
func (b *broker) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// Wait for the port first: a gRPC client that finds it closed backs
	// off for a second before trying again.
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if !b.running() {
			return fmt.Errorf("broker exited (%v): %s", b.err, strings.TrimSpace(b.out.String()))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker on %s not listening: %w: %s", b.addr, ctx.Err(), strings.TrimSpace(b.out.String()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	conn, err := dial(b.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		if !b.running() {
			return fmt.Errorf("broker exited (%v): %s", b.err, strings.TrimSpace(b.out.String()))
		}
		ok := true
		for _, svc := range []string{"", "retrybroker.v1.SharedState"} {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			r, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: svc})
			ccancel()
			if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				ok = false
				break
			}
		}
		if ok && (b.metricsAddr == "" || b.metricsUp()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker on %s not ready: %w: %s", b.addr, ctx.Err(), strings.TrimSpace(b.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// exitedDuring returns an error naming every broker of bs that is no
// longer running (with the end of its output): a row whose broker died
// must not pass for a measurement.
func exitedDuring(bs []*broker) error {
	var errs []error
	for _, b := range bs {
		if !b.running() {
			errs = append(errs, fmt.Errorf("broker %s (pid %d) exited during the run (%v): %s", b.addr, b.pid(), b.err, lastLines(b.out.String(), 5)))
		}
	}
	return errors.Join(errs...)
}

// lastLines returns the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// stop stops the broker process and closes the scraping connection.
func (b *broker) stop(grace time.Duration) {
	b.process.stop(grace)
	if b.scrape != nil {
		b.scrape.CloseIdleConnections()
	}
}

func (b *broker) metricsUp() bool {
	_, err := b.metrics()
	return err == nil
}

// metrics scrapes the broker's Prometheus endpoint and returns each sample
// summed over its labels, keyed by metric name.
func (b *broker) metrics() (map[string]float64, error) {
	if b.metricsAddr == "" {
		return nil, errors.New("metrics not enabled")
	}
	if b.scrape == nil {
		b.scrape = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	}
	resp, err := b.scrape.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	m, err := parseMetrics(resp.Body)
	_, _ = io.Copy(io.Discard, resp.Body)
	return m, err
}

// parseMetrics reads the Prometheus text format, summing samples of a
// metric over its label sets.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			rest, ok = strings.TrimSpace(line[j+1:]), true
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// dial opens a plaintext gRPC connection to a loopback address, ignoring
// proxy variables, with extra options appended.
func dial(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithNoProxy(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}, extra...)
	return grpc.NewClient(addr, opts...)
}

// brokerClient dials a broker and returns its client and connection.
func brokerClient(addr string) (rbv1.BrokerServiceClient, *grpc.ClientConn, error) {
	conn, err := dial(addr)
	if err != nil {
		return nil, nil, err
	}
	return rbv1.NewBrokerServiceClient(conn), conn, nil
}

// redisServer is a redis-server process on a free loopback port, keeping
// nothing on disk.
type redisServer struct {
	*process
	addr string
	dir  string
}

func startRedis(ctx context.Context, bin, dir string) (*redisServer, error) {
	if bin == "" {
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, errors.New("redis-server not found on PATH (apt-get install -y redis-server, or make redis)")
		}
		bin = p
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &redisServer{addr: net.JoinHostPort(loopback, strconv.Itoa(port)), dir: dir}
		s.process, err = startProcess(bin, "--port", strconv.Itoa(port), "--bind", loopback,
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning")
		if err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := s.command("PING"); err == nil {
				return s, nil
			}
			if !s.running() {
				lastErr = fmt.Errorf("redis-server exited: %s", strings.TrimSpace(s.out.String()))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				lastErr = errors.New("redis-server did not answer PING")
				s.stop(time.Second)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil, lastErr
}

// URL returns the server's URL, database 0.
func (s *redisServer) URL() string { return "redis://" + s.addr + "/0" }

// command sends one inline command to the server; see redisCommand.
func (s *redisServer) command(cmd string) (string, error) { return redisCommand(s.addr, cmd) }

// redisCommand sends one inline command to the Redis at addr (loopback)
// on a connection of its own and returns the whole reply, for the few
// admin commands the suite needs (PING, FLUSHALL, INFO, ACL CAT). Bulk
// replies are returned without their length line; an array of bulk
// strings is returned one element a line. The exchange is bounded by 5 s.
func redisCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	if n, ok := strings.CutPrefix(line, "*"); ok {
		count, err := strconv.Atoi(n)
		if err != nil {
			return "", fmt.Errorf("bad array length %q", line)
		}
		var out []string
		for range count {
			l, err := readLine(r)
			if err != nil {
				return "", err
			}
			v, err := readValue(r, l)
			if err != nil {
				return "", err
			}
			out = append(out, v)
		}
		return strings.Join(out, "\n"), nil
	}
	return readValue(r, line)
}

// readLine reads one RESP line without its CRLF.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// readValue returns the value of a simple, error, integer or bulk reply
// whose first line is line.
func readValue(r *bufio.Reader, line string) (string, error) {
	switch {
	case strings.HasPrefix(line, "+"), strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

// commandCount is one command's line of INFO commandstats: the calls it
// ran (commands run by scripts included) and the calls refused before
// they ran (rejected_calls: a MOVED redirection, a refused ACL, ...).
type commandCount struct {
	Calls, Rejected int64
}

// commandStats returns the calls per command of the Redis at addr, from
// INFO commandstats ("cluster|slots" for subcommands).
func commandStats(addr string) (map[string]commandCount, error) {
	info, err := redisCommand(addr, "INFO commandstats")
	if err != nil {
		return nil, err
	}
	return parseCommandStats(info), nil
}

// parseCommandStats reads the lines "cmdstat_NAME:calls=N,...,rejected_calls=M,..."
// of INFO commandstats.
func parseCommandStats(info string) map[string]commandCount {
	out := map[string]commandCount{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		var c commandCount
		for _, kv := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				c.Calls = n
			case "rejected_calls":
				c.Rejected = n
			}
		}
		out[name] = c
	}
	return out
}

// roundTripProxy forwards loopback TCP connections to a target and counts
// round trips: a client write that follows a server reply (or opens the
// connection) starts a new one. Pipelined commands sent together count once.
type roundTripProxy struct {
	lis    net.Listener
	target string

	mu         sync.Mutex
	roundTrips int64
	conns      []net.Conn
	wg         sync.WaitGroup
}

func startRoundTripProxy(target string) (*roundTripProxy, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, err
	}
	p := &roundTripProxy{lis: lis, target: target}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *roundTripProxy) addr() string { return p.lis.Addr().String() }

func (p *roundTripProxy) count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.roundTrips
}

func (p *roundTripProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		var dirMu sync.Mutex
		awaitingReply := false
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			defer u.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					dirMu.Lock()
					if !awaitingReply {
						awaitingReply = true
						p.mu.Lock()
						p.roundTrips++
						p.mu.Unlock()
					}
					dirMu.Unlock()
					if _, werr := u.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := u.Read(buf)
				if n > 0 {
					dirMu.Lock()
					awaitingReply = false
					dirMu.Unlock()
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *roundTripProxy) close() {
	_ = p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// buildBroker builds ./cmd/broker of the module at root into dir.
func buildBroker(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "broker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/broker")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/broker: %w: %s", err, out.String())
	}
	return bin, nil
}
