package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// TestTLSRequiresCertAndUser checks the TLS server: a client with the CA,
// the client certificate and an ACL user gets in; one without the
// certificate or with the default user does not.
func TestTLSRequiresCertAndUser(t *testing.T) {
	s := redistest.StartTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := s.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	try := func(o *redis.Options) error {
		o.Addr, o.DisableIdentity, o.MaxRetries = s.Addr(), true, -1
		c := redis.NewClient(o)
		defer c.Close()
		return c.Set(ctx, "rb:v1:x", "1", time.Minute).Err()
	}
	if err := try(&redis.Options{TLSConfig: cfg, Username: redistest.UserBroker, Password: s.Password(redistest.UserBroker)}); err != nil {
		t.Fatalf("broker user with the client certificate: %v", err)
	}
	if err := try(&redis.Options{TLSConfig: cfg}); !redis.IsAuthError(err) {
		t.Fatalf("default user: %v, want an authentication error", err)
	}
	noCert := cfg.Clone()
	noCert.Certificates = nil
	if err := try(&redis.Options{TLSConfig: noCert, Username: redistest.UserBroker, Password: s.Password(redistest.UserBroker)}); err == nil {
		t.Fatal("a client without a certificate got in")
	}
	if err := try(&redis.Options{Username: redistest.UserBroker, Password: s.Password(redistest.UserBroker)}); err == nil {
		t.Fatal("a plaintext client got in")
	}
}
