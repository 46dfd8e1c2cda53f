package tasks_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/retrybroker/retrybroker/internal/tasks"
)

// Two fixed test keys (never used anywhere else).
var (
	keyA = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	keyB = base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
)

func keyring(t *testing.T, lines ...string) *tasks.Keyring {
	t.Helper()
	k, err := tasks.ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var binding = tasks.SealBinding{Tenant: "acme", TaskID: "t1", Header: "Authorization"}

// TestSealRoundTrip: a sealed value opens to itself for the same binding,
// holds nothing of it in clear, and is different on every seal (a fresh
// nonce each time).
func TestSealRoundTrip(t *testing.T) {
	k := keyring(t, "# test keys", "", "  a:"+keyA+"  ")
	const secret = "Bearer s3cret-token-value"
	one, err := k.Seal(secret, binding)
	if err != nil {
		t.Fatal(err)
	}
	two, err := k.Seal(secret, binding)
	if err != nil {
		t.Fatal(err)
	}
	if one == two {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	for _, s := range []string{one, two} {
		if strings.Contains(s, "s3cret") || !tasks.IsSealed(s) {
			t.Fatalf("sealed value %q", s)
		}
		got, err := k.Open(s, binding)
		if err != nil || got != secret {
			t.Fatalf("open: %q %v", got, err)
		}
	}
	if tasks.IsSealed(secret) {
		t.Fatal("a plain value reported sealed")
	}
	empty, err := k.Seal("", binding)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(empty, binding); err != nil || got != "" {
		t.Fatalf("empty value: %q %v", got, err)
	}
}

// TestSealRotation: with a new key put first, values sealed by the old
// key still open and new values are sealed by the new key; once the old
// key is removed, its values fail with the key's ID (and nothing else).
func TestSealRotation(t *testing.T) {
	old := keyring(t, "old:"+keyA)
	sealedOld, err := old.Seal("v1", binding)
	if err != nil {
		t.Fatal(err)
	}
	rotated := keyring(t, "new:"+keyB, "old:"+keyA)
	if got, err := rotated.Open(sealedOld, binding); err != nil || got != "v1" {
		t.Fatalf("old value after rotation: %q %v", got, err)
	}
	if rotated.SealingKeyID() != "new" {
		t.Fatalf("sealing key %q, want the first line's", rotated.SealingKeyID())
	}
	sealedNew, err := rotated.Seal("v2", binding)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Open(sealedNew, binding); err == nil {
		t.Fatal("the old keyring opened a value the new key sealed")
	}
	onlyNew := keyring(t, "new:"+keyB)
	if got, err := onlyNew.Open(sealedNew, binding); err != nil || got != "v2" {
		t.Fatalf("new value: %q %v", got, err)
	}
	_, err = onlyNew.Open(sealedOld, binding)
	var missing *tasks.KeyMissingError
	if !errors.As(err, &missing) || missing.KeyID != "old" || strings.Contains(err.Error(), keyA) {
		t.Fatalf("old value without its key: %v", err)
	}
	var none *tasks.Keyring
	if _, err := none.Open(sealedNew, binding); !errors.Is(err, tasks.ErrNoKey) {
		t.Fatalf("no keyring: %v", err)
	}
	if _, err := none.Seal("x", binding); !errors.Is(err, tasks.ErrNoKey) {
		t.Fatalf("seal without a keyring: %v", err)
	}
}

// TestSealTamperingDetected: any change to a sealed value (a flipped
// byte, a cut, another key's ID) is refused, not opened to garbage.
func TestSealTamperingDetected(t *testing.T) {
	k := keyring(t, "a:"+keyA, "b:"+keyB)
	sealed, err := k.Seal("Bearer token", binding)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(sealed, ':') + 1
	payload, _ := base64.RawStdEncoding.DecodeString(sealed[i:])
	for name, v := range map[string]string{
		"flipped byte":  sealed[:i] + base64.RawStdEncoding.EncodeToString(flip(payload, len(payload)-1)),
		"flipped nonce": sealed[:i] + base64.RawStdEncoding.EncodeToString(flip(payload, 0)),
		"cut":           sealed[:len(sealed)-4],
		"no payload":    sealed[:i],
		"other key":     strings.Replace(sealed, ":a:", ":b:", 1),
		"not base64":    sealed[:i] + "!!!!",
		"no key id":     "\x00rbseal1:",
	} {
		if _, err := k.Open(v, binding); !errors.Is(err, tasks.ErrSealBroken) {
			t.Errorf("%s: %v, want ErrSealBroken", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}

// TestSealBoundToTask: a value sealed for one tenant's task and header
// does not open for another tenant, another task or another header, so
// it cannot be moved in the database.
func TestSealBoundToTask(t *testing.T) {
	k := keyring(t, "a:"+keyA)
	sealed, err := k.Seal("Bearer token", binding)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]tasks.SealBinding{
		"tenant": {Tenant: "other", TaskID: binding.TaskID, Header: binding.Header},
		"task":   {Tenant: binding.Tenant, TaskID: "t2", Header: binding.Header},
		"header": {Tenant: binding.Tenant, TaskID: binding.TaskID, Header: "X-Debug"},
		// Length-prefixed parts: a shifted boundary is another binding.
		"shifted": {Tenant: "acmet", TaskID: "1", Header: binding.Header},
	} {
		if _, err := k.Open(sealed, b); !errors.Is(err, tasks.ErrSealBroken) {
			t.Errorf("another %s: %v, want ErrSealBroken", name, err)
		}
	}
}

// TestParseKeysErrors: every bad key file is refused with the line and
// what is wrong, and no error repeats a line's content.
func TestParseKeysErrors(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("short-key-material"))
	for _, c := range []struct {
		name, file, want string
	}{
		{"empty", "", "holds no key"},
		{"comments only", "# nothing\n\n", "holds no key"},
		{"no id", keyA, "line 1: want ID:KEY"},
		{"bad id", "bad id!:" + keyA, "line 1: want ID:KEY"},
		{"long id", strings.Repeat("x", 33) + ":" + keyA, "line 1: want ID:KEY"},
		{"short key", "a:" + keyA + "\nb:" + short, "line 2: the key is not 32 bytes"},
		{"long key", "a:" + keyA + keyA, "line 1: the key is not 32 bytes"},
		{"not base64", "a:" + strings.Repeat("*", 44), "line 1: the key is not 32 bytes"},
		{"duplicate id", "a:" + keyA + "\n# x\na:" + keyB, "line 3: the key ID is used"},
		{"too large", strings.Repeat("#", tasks.MaxKeyFile+1), "more than 65536"},
	} {
		_, err := tasks.ParseKeys([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
			continue
		}
		for _, secret := range []string{keyA, keyB, short, "bad id", "short-key"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error repeats the file: %v", c.name, err)
			}
		}
	}
}

// TestLoadKeyFile: a regular file loads; a missing file, a directory and
// a FIFO are refused (the FIFO before it is opened: a load never blocks).
func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	if err := os.WriteFile(good, []byte("k1:"+keyA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := tasks.LoadKeyFile(good)
	if err != nil || k.SealingKeyID() != "k1" {
		t.Fatalf("load: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), dir, fifo} {
		if _, err := tasks.LoadKeyFile(p); err == nil {
			t.Errorf("%s loaded", p)
		}
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("k1:"+keyA[:20]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.LoadKeyFile(bad); err == nil || !strings.Contains(err.Error(), bad+": line 1") || strings.Contains(err.Error(), keyA[:20]) {
		t.Fatalf("bad file: %v", err)
	}
}

// FuzzParseKeys: no key file crashes the parser, and an accepted file
// seals and opens.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("a:" + keyA + "\n"))
	f.Add([]byte("# c\nnew:" + keyB + "\nold:" + keyA))
	f.Add([]byte("a:" + keyA + "\na:" + keyA))
	f.Add([]byte(":\n:::"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := tasks.ParseKeys(data)
		if err != nil {
			return
		}
		s, err := k.Seal("v", binding)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Open(s, binding); err != nil || got != "v" {
			t.Fatalf("round trip: %q %v", got, err)
		}
	})
}

// FuzzOpen: no stored value crashes Open, and none opens to anything but
// the one value sealed (the fuzzer cannot forge GCM's tag).
func FuzzOpen(f *testing.F) {
	k, err := tasks.ParseKeys([]byte("a:" + keyA))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := k.Seal("v", binding)
	f.Add(good)
	f.Add("\x00rbseal1:a:")
	f.Add("\x00rbseal1:zz:AAAA")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, v string) {
		if got, err := k.Open(v, binding); err == nil && got != "v" {
			t.Fatalf("%q opened to %q", v, got)
		}
	})
}
