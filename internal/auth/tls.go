package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// CertCheckInterval is how often, at most, ServerTLS looks at the
// certificate and key files for a rotated pair.
const CertCheckInterval = 10 * time.Second

// ServerTLS returns the broker's server transport credentials: TLS 1.2 or
// later with the certificate and key in PEM files.
//
// With clientCAFile set, client certificates are verified against the CA
// certificates (PEM) in it: they are optional when requireClientCert is
// false (callers may use an API key instead) and required when it is true.
// Requiring client certificates without a CA file is an error. A verified
// certificate identifies a tenant through New.
//
// The certificate and key are read again when their files change (checked
// at most every CertCheckInterval, on a handshake), so a rotated pair, for
// example from cert-manager, is served without a restart. A rotated pair
// that cannot be loaded is ignored and the previous one kept. The client
// CA file is read once.
func ServerTLS(certFile, keyFile, clientCAFile string, requireClientCert bool) (credentials.TransportCredentials, error) {
	cfg, _, err := serverTLSConfig(certFile, keyFile, clientCAFile, requireClientCert)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// serverTLSConfig builds the configuration behind ServerTLS and returns its
// key pair (for tests).
func serverTLSConfig(certFile, keyFile, clientCAFile string, requireClientCert bool) (*tls.Config, *keyPair, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile, interval: CertCheckInterval, now: time.Now}
	if err := kp.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: kp.get,
	}
	switch {
	case clientCAFile != "":
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("client CA %s: no PEM certificates found", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if requireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	case requireClientCert:
		return nil, nil, errors.New("requiring client certificates needs a client CA file to verify them against")
	}
	return cfg, kp, nil
}

// keyPair serves a certificate and reloads it when its files change.
type keyPair struct {
	certFile, keyFile string
	interval          time.Duration
	now               func() time.Time

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     fileStamp
	lastCheck time.Time
}

// fileStamp identifies a version of the two files.
type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

func stampOf(certFile, keyFile string) (fileStamp, error) {
	c, err := os.Stat(certFile)
	if err != nil {
		return fileStamp{}, err
	}
	k, err := os.Stat(keyFile)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

// load reads the pair; on error the current one is kept.
func (kp *keyPair) load() error {
	st, err := stampOf(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.stamp = &cert, st
	return nil
}

// get returns the current certificate, reloading it when the files
// changed since the last check.
func (kp *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if now := kp.now(); now.Sub(kp.lastCheck) >= kp.interval {
		kp.lastCheck = now
		if st, err := stampOf(kp.certFile, kp.keyFile); err == nil && st != kp.stamp {
			_ = kp.load() // keep serving the old pair if the new one is broken
		}
	}
	return kp.cert, nil
}
