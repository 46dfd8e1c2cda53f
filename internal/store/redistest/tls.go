package redistest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ACL users of a TLSServer. Every user is defined in its ACL file; the
// default user is off, so every connection must authenticate.
const (
	// UserAdmin may do anything.
	UserAdmin = "admin"
	// UserBroker has exactly the permissions docs/operations.md
	// recommends for the broker: BrokerACL on the keys rb:v1:*.
	UserBroker = "broker"
	// UserReadOnly may run scripts and read, but not write (the scripts'
	// writes fail with NOPERM).
	UserReadOnly = "reader"
	// UserOtherKeys has every command, on keys that are not the broker's.
	UserOtherKeys = "otherkeys"
)

// BrokerACL is the command list the broker's Redis user needs (after
// -@all, on the keys and channels rb:v1:*, see BrokerChannels): PING for checks, CLUSTER SLOTS for a cluster client, the
// scripts (EVALSHA, EVAL, SCRIPT LOAD) and the commands they run, and
// PUBLISH and SUBSCRIBE for local admission's announcements. AUTH and HELLO
// need no permission. The topology tests run the store suite and Verify as
// this user on every topology; docs/operations.md shows the same list.
const BrokerACL = "+ping +cluster|slots +evalsha +eval +script|load +publish +subscribe " +
	"+get +set +del +pexpire +pttl +hget +hmget +hset +hdel +hincrby +hgetall +hkeys +zadd +zrem +zcard +zcount +zrange +zrangebyscore +zremrangebyscore +zscore"

// BrokerChannels is the channel rule of the broker's Redis user: the
// channels of its prefix, on which replicas announce gates that stop being
// plain (rb:v1:plain with the default prefix).
const BrokerChannels = "resetchannels &rb:v1:*"

// TLSServer is a redis-server that accepts only TLS connections with a
// client certificate from its own CA, and only ACL users with a password.
type TLSServer struct {
	n         *node
	passwords map[string]string
	// CAFile is the PEM file of the CA that signed the server's and the
	// client's certificates.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM).
	CertFile, KeyFile string
	// ServerName is a name in the server's certificate other than its
	// address ("redis.test"), for --redis-tls-server-name.
	ServerName string
}

// StartTLS starts a TLS server for tb and stops it at cleanup. It calls
// tb.Fatal when it cannot.
func StartTLS(tb testing.TB) *TLSServer {
	tb.Helper()
	s, err := NewTLS(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// NewTLS generates a CA, a server and a client certificate and the ACL
// file under dir, and starts the server. The caller must Close it.
func NewTLS(dir string) (*TLSServer, error) {
	bin, err := lookPath()
	if err != nil {
		return nil, err
	}
	s := &TLSServer{passwords: map[string]string{}, ServerName: "redis.test"}
	if err := s.writeFiles(dir); err != nil {
		return nil, fmt.Errorf("redistest: TLS files: %w", err)
	}
	tlsCfg, err := s.ClientTLS()
	if err != nil {
		return nil, err
	}
	s.n = &node{bin: bin, dir: dir}
	s.n.args = func() []string {
		args := baseArgs(0, dir)
		return append(args,
			"--tls-port", strconv.Itoa(s.n.port),
			"--tls-cert-file", filepath.Join(dir, "server.crt"),
			"--tls-key-file", filepath.Join(dir, "server.key"),
			"--tls-ca-cert-file", s.CAFile,
			"--tls-auth-clients", "yes",
			"--aclfile", filepath.Join(dir, "users.acl"),
		)
	}
	s.n.ready = func(ctx context.Context) error {
		return pingTLS(ctx, s.n.addr(), tlsCfg, UserAdmin, s.passwords[UserAdmin])
	}
	if err := startOnFreePorts(s.n, func() (err error) { s.n.port, err = freePort(); return err }); err != nil {
		return nil, fmt.Errorf("redistest: TLS server: %w", err)
	}
	return s, nil
}

// Addr returns the server's host:port.
func (s *TLSServer) Addr() string { return s.n.addr() }

// URL returns a rediss:// URL for the server without credentials.
func (s *TLSServer) URL() string { return "rediss://" + s.Addr() + "/0" }

// Password returns the password of an ACL user ("" for unknown users).
func (s *TLSServer) Password(user string) string { return s.passwords[user] }

// Pid returns the server's process id.
func (s *TLSServer) Pid() int { return s.n.pid() }

// ClientTLS returns a client TLS configuration that trusts the CA and
// presents the client certificate.
func (s *TLSServer) ClientTLS() (*tls.Config, error) {
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Close stops the server by its pid.
func (s *TLSServer) Close() error { return s.n.stop() }

func (s *TLSServer) writeFiles(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	s.CAFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(s.CAFile, "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP, dns []string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(filepath.Join(dir, name+".key"), "PRIVATE KEY", keyDER)
	}
	if err := leaf("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost", s.ServerName}); err != nil {
		return err
	}
	if err := leaf("client", 3, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	s.CertFile, s.KeyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")

	perms := map[string]string{
		UserAdmin:     "~* &* +@all",
		UserBroker:    "~rb:v1:* " + BrokerChannels + " -@all " + BrokerACL,
		UserReadOnly:  "~rb:v1:* resetchannels -@all +@connection +@read +@scripting +info +command +cluster|slots",
		UserOtherKeys: "~other:* resetchannels +@all",
	}
	var acl strings.Builder
	acl.WriteString("user default off\n")
	for _, user := range []string{UserAdmin, UserBroker, UserReadOnly, UserOtherKeys} {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		s.passwords[user] = hex.EncodeToString(b[:])
		fmt.Fprintf(&acl, "user %s on >%s %s\n", user, s.passwords[user], perms[user])
	}
	return os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl.String()), 0o600)
}

// pingTLS authenticates as user over TLS and sends one PING, in the inline
// protocol.
func pingTLS(ctx context.Context, addr string, cfg *tls.Config, user, password string) error {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "AUTH %s %s\r\nPING\r\n", user, password); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != want {
			return fmt.Errorf("unexpected reply %q", line)
		}
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if data == nil {
		return errors.New("encode PEM")
	}
	return os.WriteFile(path, data, 0o600)
}
