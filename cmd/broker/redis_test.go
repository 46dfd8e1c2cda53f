package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// parseRedis registers the Redis flags with env as the environment and
// parses args.
func parseRedis(t *testing.T, env map[string]string, args ...string) *redisOptions {
	t.Helper()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := addRedisFlagsEnv(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRedisConfigTopologies(t *testing.T) {
	cfg, _, err := parseRedis(t, nil).redisConfig()
	if err != nil || cfg.URL != "" || cfg.ClusterAddrs != nil || cfg.SentinelMaster != "" {
		t.Fatalf("no Redis option: %+v, %v; want the memory store", cfg, err)
	}
	cfg, _, err = parseRedis(t, nil, "--redis-cluster", "a:1, b:2").redisConfig()
	if err != nil || !slices.Equal(cfg.ClusterAddrs, []string{"a:1", "b:2"}) {
		t.Fatalf("--redis-cluster: %+v, %v", cfg, err)
	}
	cfg, _, err = parseRedis(t, map[string]string{envSentinel: "mymaster@s1:26379,s2:26379"}).redisConfig()
	if err != nil || cfg.SentinelMaster != "mymaster" || len(cfg.SentinelAddrs) != 2 {
		t.Fatalf("$%s: %+v, %v", envSentinel, cfg, err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string // in the error
	}{
		{map[string]string{envURL: "redis://h:1/0"}, []string{"--redis-cluster", "a:1"}, "$BROKER_REDIS_URL and --redis-cluster"},
		{nil, []string{"--redis", "redis://h:1/0", "--redis-sentinel", "m@a:1"}, "--redis and --redis-sentinel"},
		{nil, []string{"--redis-cluster", "a:1,,b:2"}, "--redis-cluster"},
		{map[string]string{envSentinel: "a:1"}, nil, "$BROKER_REDIS_SENTINEL"},
		{nil, []string{"--redis-user", "broker"}, "--redis-user needs --redis"},
		{map[string]string{envPassword: "pw"}, nil, "$BROKER_REDIS_PASSWORD needs --redis"},
		{nil, []string{"--redis-tls"}, "--redis-tls needs --redis"},
		{nil, []string{"--redis", "redis://h:1/0", "--redis-sentinel-user", "s"}, "need --redis-sentinel"},
	} {
		_, _, err := parseRedis(t, c.env, c.args...).redisConfig()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %q: error %v, want one saying %q", c.env, c.args, err, c.want)
		}
	}
}

func TestRedisConfigPasswords(t *testing.T) {
	file := writeFile(t, "pw", "s3cret\n")
	cfg, warn, err := parseRedis(t, nil, "--redis", "redis://h:1/0", "--redis-user", "broker", "--redis-password-file", file).redisConfig()
	if err != nil || cfg.Username != "broker" || cfg.Password != "s3cret" || len(warn) != 0 {
		t.Fatalf("password file: %+v %q, %v", cfg, warn, err)
	}
	cfg, _, err = parseRedis(t, map[string]string{envPassword: "fromenv"}, "--redis-cluster", "a:1").redisConfig()
	if err != nil || cfg.Password != "fromenv" {
		t.Fatalf("$%s: %+v, %v", envPassword, cfg, err)
	}
	cfg, _, err = parseRedis(t, map[string]string{envSentinelPassword: "sp"}, "--redis-sentinel", "m@a:1", "--redis-sentinel-user", "su").redisConfig()
	if err != nil || cfg.SentinelUsername != "su" || cfg.SentinelPassword != "sp" || cfg.Password != "" {
		t.Fatalf("sentinel credentials: %+v, %v", cfg, err)
	}
	// A password in the URL works, with a warning when it is on the
	// command line (the process list), none from the environment.
	_, warn, err = parseRedis(t, nil, "--redis", "redis://broker:s3cret@h:1/0").redisConfig()
	if err != nil || len(warn) != 1 || !strings.Contains(warn[0], "process list") || strings.Contains(warn[0], "s3cret") {
		t.Fatalf("URL password on the command line: warnings %q, %v", warn, err)
	}
	_, warn, err = parseRedis(t, map[string]string{envURL: "redis://broker:s3cret@h:1/0"}).redisConfig()
	if err != nil || len(warn) != 0 {
		t.Fatalf("URL password from the environment: warnings %q, %v", warn, err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{envPassword: "a"}, []string{"--redis", "redis://h:1/0", "--redis-password-file", file}, "give it once"},
		{map[string]string{envPassword: "a"}, []string{"--redis", "redis://u:p@h:1/0"}, "give them once"},
		{nil, []string{"--redis", "redis://h:1/0", "--redis-password-file", writeFile(t, "empty", "\n")}, "one line"},
		{nil, []string{"--redis", "redis://h:1/0", "--redis-password-file", writeFile(t, "two", "a\nb\n")}, "one line"},
		{nil, []string{"--redis", "redis://h:1/0", "--redis-password-file", filepath.Join(t.TempDir(), "missing")}, "no such file"},
	} {
		_, _, err := parseRedis(t, c.env, c.args...).redisConfig()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %q: error %v, want one saying %q", c.env, c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestRedisConfigTLS(t *testing.T) {
	srv := redistest.StartTLS(t) // for real certificate files
	cfg, _, err := parseRedis(t, nil, "--redis", "redis://h:1/0").redisConfig()
	if err != nil || cfg.TLS != nil {
		t.Fatalf("plain URL: TLS %v, %v", cfg.TLS, err)
	}
	cfg, _, err = parseRedis(t, nil, "--redis", "rediss://h:1/0").redisConfig()
	if err != nil || cfg.TLS == nil || cfg.TLS.RootCAs != nil {
		t.Fatalf("rediss:// URL: TLS %v, %v; want TLS with the system roots", cfg.TLS, err)
	}
	cfg, _, err = parseRedis(t, nil, "--redis-cluster", "a:1", "--redis-ca", srv.CAFile, "--redis-cert", srv.CertFile, "--redis-key", srv.KeyFile,
		"--redis-tls-server-name", "redis.test").redisConfig()
	if err != nil || cfg.TLS == nil || cfg.TLS.RootCAs == nil || len(cfg.TLS.Certificates) != 1 || cfg.TLS.ServerName != "redis.test" {
		t.Fatalf("cluster with a CA and a client certificate: %+v, %v", cfg.TLS, err)
	}
	cfg, _, err = parseRedis(t, map[string]string{envTLS: "true"}, "--redis-sentinel", "m@a:1").redisConfig()
	if err != nil || cfg.TLS == nil {
		t.Fatalf("$%s=true: %v, %v", envTLS, cfg.TLS, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", "rediss://h:1/0", "--redis-tls=false"}, "asks for TLS"},
		{[]string{"--redis", "redis://h:1/0", "--redis-tls=maybe"}, "true or false"},
		{[]string{"--redis", "redis://h:1/0", "--redis-cert", srv.CertFile}, "go together"},
		{[]string{"--redis", "redis://h:1/0", "--redis-ca", srv.KeyFile}, "no PEM certificate"},
		{[]string{"--redis", "redis://h:1/0", "--redis-cert", srv.CertFile, "--redis-key", srv.CAFile}, "--redis-key"},
		{[]string{"--redis", "unix:///tmp/redis.sock", "--redis-tls"}, "unix://"},
	} {
		_, _, err := parseRedis(t, nil, c.args...).redisConfig()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("args %q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}

// TestRedisHelpRedacts checks that -help never shows a password taken from
// $BROKER_REDIS_URL.
func TestRedisHelpRedacts(t *testing.T) {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	addRedisFlagsEnv(fs, func(k string) string {
		if k == envURL {
			return "redis://broker:s3cret@h:1/0"
		}
		return ""
	})
	fs.PrintDefaults()
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "redis://broker:xxxxx@h:1/0") {
		t.Fatalf("-help shows:\n%s", out.String())
	}
}

func TestDescribeRedisHasNoSecret(t *testing.T) {
	cfg, _, err := parseRedis(t, map[string]string{envPassword: "s3cret"}, "--redis-sentinel", "m@a:1", "--redis-user", "broker", "--redis-tls").redisConfig()
	if err != nil {
		t.Fatal(err)
	}
	if d := describeRedis(cfg); d != "redis sentinel m@a:1 user broker tls" {
		t.Fatalf("describeRedis = %q", d)
	}
	cfg, _, _ = parseRedis(t, nil, "--redis", "redis://u:s3cret@h:1/0").redisConfig()
	if d := describeRedis(cfg); strings.Contains(d, "s3cret") {
		t.Fatalf("describeRedis = %q", d)
	}
}

func TestRedisLocalAdmissionFlag(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want time.Duration
		err  string
	}{
		{nil, nil, redisstore.DefaultLocalAdmissionTTL, ""},
		{nil, []string{"--redis-local-admission", "0"}, 0, ""},
		{nil, []string{"--redis-local-admission", "1s"}, time.Second, ""},
		{map[string]string{envLocalAdmission: "100ms"}, nil, 100 * time.Millisecond, ""},
		{map[string]string{envLocalAdmission: "100ms"}, []string{"--redis-local-admission", "2s"}, 2 * time.Second, ""},
		{nil, []string{"--redis-local-admission", "-1s"}, 0, "--redis-local-admission: want a duration"},
		{nil, []string{"--redis-local-admission", "10s"}, 10 * time.Second, ""},
		{nil, []string{"--redis-local-admission", "11s"}, 0, "--redis-local-admission: 11s is longer than 10s"},
		{map[string]string{envLocalAdmission: "soon"}, nil, 0, "$" + envLocalAdmission + ": want a duration"},
	} {
		got, err := parseRedis(t, c.env, c.args...).localAdmissionTTL()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %q: err %v, want %q", c.env, c.args, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v %q = %v, %v; want %v", c.env, c.args, got, err, c.want)
		}
	}
}

func TestRedisHealthIntervalFlag(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want time.Duration
		err  string
	}{
		{nil, nil, store.DefaultHealthInterval, ""},
		{nil, []string{"--redis-health-interval", "0"}, -1, ""},
		{nil, []string{"--redis-health-interval", "200ms"}, 200 * time.Millisecond, ""},
		{map[string]string{envHealthInterval: "1s"}, nil, time.Second, ""},
		{map[string]string{envHealthInterval: "1s"}, []string{"--redis-health-interval", "2s"}, 2 * time.Second, ""},
		{nil, []string{"--redis-health-interval", "-1s"}, 0, "--redis-health-interval: want a duration"},
		{map[string]string{envHealthInterval: "often"}, nil, 0, "$" + envHealthInterval + ": want a duration"},
	} {
		got, err := parseRedis(t, c.env, c.args...).healthEvery()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %q: err %v, want %q", c.env, c.args, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v %q = %v, %v; want %v", c.env, c.args, got, err, c.want)
		}
	}
}

func TestRedisStartWaitFlag(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want time.Duration
		err  string
	}{
		{nil, nil, DefaultStartWait, ""},
		{nil, []string{"--redis-start-wait", "0"}, 0, ""},
		{nil, []string{"--redis-start-wait", "10s"}, 10 * time.Second, ""},
		{map[string]string{envStartWait: "1s"}, nil, time.Second, ""},
		{map[string]string{envStartWait: "1s"}, []string{"--redis-start-wait", "2s"}, 2 * time.Second, ""},
		{nil, []string{"--redis-start-wait", "-1s"}, 0, "--redis-start-wait: want a duration"},
		{nil, []string{"--redis-start-wait", "6m"}, 0, "--redis-start-wait: 6m0s is longer than 5m0s"},
		{map[string]string{envStartWait: "later"}, nil, 0, "$" + envStartWait + ": want a duration"},
	} {
		got, err := parseRedis(t, c.env, c.args...).startWaitFor()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %q: err %v, want %q", c.env, c.args, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v %q = %v, %v; want %v", c.env, c.args, got, err, c.want)
		}
	}
}
