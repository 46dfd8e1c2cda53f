package credential

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// httpsigVerifier is an RFC 9421 verifier written from the RFC (2.1, 2.2,
// 2.5 and 3.2), not from the signer: it rebuilds the signature base from
// the request as a plain-HTTP server received it, takes the
// @signature-params line verbatim from the received Signature-Input,
// checks created and expires against its clock, and checks Content-Digest
// (RFC 9530) against the body it read.
type httpsigVerifier struct {
	label  string
	verify func(base, sig []byte) bool
	now    func() time.Time
	maxAge time.Duration
}

func (v *httpsigVerifier) check(r *http.Request, body []byte) error {
	rawInput := strings.Join(r.Header.Values("Signature-Input"), ", ")
	inputs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature-Input"))
	if err != nil {
		return fmt.Errorf("Signature-Input: %w", err)
	}
	m, ok := inputs.Get(v.label)
	if !ok {
		return fmt.Errorf("no signature %s", v.label)
	}
	il, ok := m.(httpsfv.InnerList)
	if !ok {
		return errors.New("Signature-Input member is not an inner list")
	}
	params, ok := strings.CutPrefix(rawInput, v.label+"=")
	if !ok || len(inputs.Names()) != 1 {
		return errors.New("this verifier takes exactly one signature")
	}
	sigs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature"))
	if err != nil {
		return fmt.Errorf("Signature: %w", err)
	}
	sm, ok := sigs.Get(v.label)
	if !ok {
		return errors.New("no Signature member")
	}
	sitem, ok := sm.(httpsfv.Item)
	if !ok {
		return errors.New("Signature member is not an item")
	}
	sig, ok := sitem.Value.([]byte)
	if !ok {
		return errors.New("Signature member is not a byte sequence")
	}

	now := v.now().Unix()
	created, ok := il.Params.Get("created")
	if !ok {
		return errors.New("no created")
	}
	if c := created.(int64); c > now || now-c > int64(v.maxAge/time.Second) {
		return fmt.Errorf("created %d is not within %s of %d", c, v.maxAge, now)
	}
	if expires, ok := il.Params.Get("expires"); ok && expires.(int64) < now {
		return fmt.Errorf("expired at %d", expires.(int64))
	}

	var base strings.Builder
	path, query, _ := strings.Cut(r.RequestURI, "?")
	for _, it := range il.Items {
		name := it.Value.(string)
		var value string
		switch name {
		case "@method":
			value = r.Method
		case "@target-uri":
			value = "http://" + r.Host + r.RequestURI
		case "@authority":
			value = strings.TrimSuffix(strings.ToLower(r.Host), ":80")
		case "@scheme":
			value = "http"
		case "@request-target":
			value = r.RequestURI
		case "@path":
			value = path
		case "@query":
			value = "?" + query
		case "host":
			value = r.Host
		default:
			lines, ok := r.Header[http.CanonicalHeaderKey(name)]
			if !ok {
				return fmt.Errorf("covered field %s is missing", name)
			}
			for i := range lines {
				lines[i] = strings.Trim(lines[i], " \t")
			}
			value = strings.Join(lines, ", ")
		}
		fmt.Fprintf(&base, "%q: %s\n", name, value)
		if name == "content-digest" {
			d, err := httpsfv.UnmarshalDictionary([]string{value})
			if err != nil {
				return fmt.Errorf("Content-Digest: %w", err)
			}
			dm, ok := d.Get("sha-256")
			sum := sha256.Sum256(body)
			if !ok || !bytes.Equal(dm.(httpsfv.Item).Value.([]byte), sum[:]) {
				return errors.New("Content-Digest does not match the body")
			}
		}
	}
	base.WriteString(`"@signature-params": ` + params)
	if !v.verify([]byte(base.String()), sig) {
		return errors.New("signature does not verify")
	}
	return nil
}

// httpsigServer is a loopback upstream that answers 200 to a request its
// verifier accepts and 401 (with the reason) to any other.
func httpsigServer(t *testing.T, v *httpsigVerifier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = v.check(r, body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// httpsigClient dials loopback addresses only, whatever a request names.
func httpsigClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("test dialer refuses %s: loopback only", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// httpsigSend sends req and returns the status and the server's reason.
func httpsigSend(t *testing.T, client *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// httpsigAttempt builds one attempt's request as the engine does: a fresh
// request per attempt, the body from the call.
func httpsigAttempt(t *testing.T, method, url string, body []byte, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	return req
}

func httpsigVerifiers(t *testing.T, hmacKey []byte) map[string]func(base, sig []byte) bool {
	pub := httpsigRFCPublicKey(t)
	return map[string]func(base, sig []byte) bool{
		"ed25519": func(base, sig []byte) bool { return ed25519.Verify(pub, base, sig) },
		"hmac-sha256": func(base, sig []byte) bool {
			m := hmac.New(sha256.New, hmacKey)
			m.Write(base)
			return hmac.Equal(m.Sum(nil), sig)
		},
	}
}

// TestHTTPSignatureVerifiedByLoopbackServer: signatures made by Apply, for
// both algorithms, with the default components and with every supported
// component, are accepted by an independent verifier in a loopback server,
// which rebuilds the base from the request it received.
func TestHTTPSignatureVerifiedByLoopbackServer(t *testing.T) {
	clock := &httpsigClock{now: time.Unix(1_700_000_000, 0)}
	hmacKey := httpsigRFCSharedSecret(t)
	keys := map[string]SecretRef{
		"ed25519":     {File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")},
		"hmac-sha256": {File: httpsigWriteFile(t, "hmac", hmacKey)},
	}
	client := httpsigClient(t)
	for alg, verify := range httpsigVerifiers(t, hmacKey) {
		for _, comps := range [][]string{
			nil,
			{"@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query", "Content-Type", "x-multi", "content-digest", "content-length", "host"},
		} {
			t.Run(fmt.Sprintf("%s/%d", alg, len(comps)), func(t *testing.T) {
				srv := httpsigServer(t, &httpsigVerifier{label: "sig1", verify: verify, now: clock.Now, maxAge: 30 * time.Second})
				c := httpsigNew(t, SignatureSpec{Algorithm: alg, KeyID: "k1", Key: keys[alg], Components: comps, Tag: "retrybroker", Expires: time.Minute}, clock)
				body := []byte(`{"hello": "world"}`)
				h := http.Header{"Content-Type": {"application/json"}, "X-Multi": {" a ", "b\t"}}
				req := httpsigAttempt(t, http.MethodPost, srv.URL+"/foo/b%20r?param=Value&Pet=dog", body, h)
				if _, err := c.Apply(context.Background(), req, NewCall(body)); err != nil {
					t.Fatal(err)
				}
				if code, why := httpsigSend(t, client, req); code != http.StatusOK {
					t.Fatalf("verifier refused: %d %s (Signature-Input %s)", code, why, req.Header.Get("Signature-Input"))
				}
				if comps == nil {
					get := httpsigAttempt(t, http.MethodGet, srv.URL+"/", nil, nil)
					if _, err := c.Apply(context.Background(), get, NewCall(nil)); err != nil {
						t.Fatal(err)
					}
					if code, why := httpsigSend(t, client, get); code != http.StatusOK {
						t.Fatalf("verifier refused a GET: %d %s", code, why)
					}
				}
			})
		}
	}
}

// TestHTTPSignatureFreshPerAttempt: sign, wait 40 s (fake clock), sign the
// retry: created differs and both verify when sent; the first attempt's
// signature re-sent after the wait is refused as stale; a request whose
// covered header or body changed after signing fails verification.
func TestHTTPSignatureFreshPerAttempt(t *testing.T) {
	client := httpsigClient(t)
	for alg, verify := range httpsigVerifiers(t, httpsigRFCSharedSecret(t)) {
		t.Run(alg, func(t *testing.T) {
			clock := &httpsigClock{now: time.Unix(1_700_000_000, 0)}
			key := SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")}
			if alg == "hmac-sha256" {
				key = SecretRef{File: httpsigWriteFile(t, "hmac", httpsigRFCSharedSecret(t))}
			}
			srv := httpsigServer(t, &httpsigVerifier{label: "sig1", verify: verify, now: clock.Now, maxAge: 30 * time.Second})
			c := httpsigNew(t, SignatureSpec{Algorithm: alg, KeyID: "k1", Key: key}, clock)
			body := []byte(`{"n": 1}`)
			call := NewCall(body)
			h := http.Header{"Content-Type": {"application/json"}}

			first := httpsigAttempt(t, http.MethodPost, srv.URL+"/pay", body, h)
			if _, err := c.Apply(context.Background(), first, call); err != nil {
				t.Fatal(err)
			}
			if code, why := httpsigSend(t, client, first); code != http.StatusOK {
				t.Fatalf("first attempt refused: %s", why)
			}
			clock.Advance(40 * time.Second)

			stale := httpsigAttempt(t, http.MethodPost, srv.URL+"/pay", body, first.Header)
			if code, _ := httpsigSend(t, client, stale); code != http.StatusUnauthorized {
				t.Fatalf("the first attempt's signature re-sent after 40 s: %d, want 401 (stale)", code)
			}

			retry := httpsigAttempt(t, http.MethodPost, srv.URL+"/pay", body, h)
			if _, err := c.Apply(context.Background(), retry, call); err != nil {
				t.Fatal(err)
			}
			if a, b := first.Header.Get("Signature-Input"), retry.Header.Get("Signature-Input"); a == b || !strings.Contains(b, ";created=1700000040;") {
				t.Fatalf("retry Signature-Input %s, first %s: want a new created", b, a)
			}
			if code, why := httpsigSend(t, client, retry); code != http.StatusOK {
				t.Fatalf("retry refused: %s", why)
			}

			tampered := httpsigAttempt(t, http.MethodPost, srv.URL+"/pay", body, h)
			if _, err := c.Apply(context.Background(), tampered, call); err != nil {
				t.Fatal(err)
			}
			tampered.Header.Set("Content-Type", "text/plain")
			if code, why := httpsigSend(t, client, tampered); code != http.StatusUnauthorized || !strings.Contains(why, "does not verify") {
				t.Fatalf("a covered header changed after signing: %d %s, want 401", code, why)
			}

			other := []byte(`{"n": 2}`)
			swapped := httpsigAttempt(t, http.MethodPost, srv.URL+"/pay", other, h)
			if _, err := c.Apply(context.Background(), swapped, call); err != nil {
				t.Fatal(err)
			}
			if code, why := httpsigSend(t, client, swapped); code != http.StatusUnauthorized || !strings.Contains(why, "Content-Digest") {
				t.Fatalf("a body changed after signing: %d %s, want 401", code, why)
			}
		})
	}
}

// TestHTTPSignatureKeyRotation: a rotated key file is used by the next
// attempt after the file check; a rotated file holding no valid key
// leaves the last good key in use.
func TestHTTPSignatureKeyRotation(t *testing.T) {
	clock := &httpsigClock{now: time.Unix(1_700_000_000, 0)}
	keyA, keyB := []byte("key-A-0123456789abcdef0123456789"), []byte("key-B-the-rotated-one-0123456789abcdef")
	path := httpsigWriteFile(t, "hmac", keyA)
	c, err := New(Spec{Name: "sig", Kind: KindHTTPSignature, Signature: &SignatureSpec{Algorithm: "hmac-sha256", KeyID: "k", Key: SecretRef{File: path}}},
		Deps{Tenant: "t", Clock: clock, FileCheck: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client := httpsigClient(t)
	current := keyA
	srv := httpsigServer(t, &httpsigVerifier{label: "sig1", now: clock.Now, maxAge: time.Minute, verify: func(base, sig []byte) bool {
		m := hmac.New(sha256.New, current)
		m.Write(base)
		return hmac.Equal(m.Sum(nil), sig)
	}})
	send := func() (Stamp, int) {
		req := httpsigAttempt(t, http.MethodGet, srv.URL+"/", nil, nil)
		st, err := c.Apply(context.Background(), req, NewCall(nil))
		if err != nil {
			t.Fatal(err)
		}
		code, _ := httpsigSend(t, client, req)
		return st, code
	}
	st1, code := send()
	if code != http.StatusOK {
		t.Fatalf("key A: %d", code)
	}
	if err := os.WriteFile(path, keyB, 0o600); err != nil {
		t.Fatal(err)
	}
	current = keyB
	clock.Advance(2 * time.Second)
	st2, code := send()
	if code != http.StatusOK {
		t.Fatalf("after rotation the next attempt did not sign with key B: %d", code)
	}
	if st2.Generation <= st1.Generation {
		t.Errorf("generation %d after rotation, was %d", st2.Generation, st1.Generation)
	}

	// An ed25519 credential whose file is rewritten with garbage keeps
	// signing with the last good key.
	edPath := httpsigWriteFile(t, "ed.pem", httpsigTestdata(t, "httpsig-test-key-ed25519.pem"))
	var logs bytes.Buffer
	ed := httpsigNewDeps(t, SignatureSpec{Algorithm: "ed25519", KeyID: "k", Key: SecretRef{File: edPath}},
		Deps{Clock: clock, FileCheck: time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	const garbage = "garbage-secret-text-0123"
	if err := os.WriteFile(edPath, []byte(garbage), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	pub := httpsigRFCPublicKey(t)
	edSrv := httpsigServer(t, &httpsigVerifier{label: "sig1", now: clock.Now, maxAge: time.Minute, verify: func(base, sig []byte) bool { return ed25519.Verify(pub, base, sig) }})
	req := httpsigAttempt(t, http.MethodGet, edSrv.URL+"/", nil, nil)
	if _, err := ed.Apply(context.Background(), req, NewCall(nil)); err != nil {
		t.Fatalf("a bad rotated key: %v, want the last good key in use", err)
	}
	if code, why := httpsigSend(t, client, req); code != http.StatusOK {
		t.Fatalf("signed with the last good key: %d %s", code, why)
	}
	if !strings.Contains(logs.String(), "last good key") || strings.Contains(logs.String(), garbage) ||
		strings.Contains(logs.String(), "MC4CAQAwBQYDK2VwBCIEIJ") {
		t.Errorf("the log should say the last good key stays in use, without any key: %s", logs.String())
	}
}

func httpsigNewDeps(t testing.TB, sig SignatureSpec, deps Deps) Credential {
	t.Helper()
	c, err := New(Spec{Name: "sig", Kind: KindHTTPSignature, Signature: &sig}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
