package tasks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Keyring holds the keys that seal the sensitive header values of stored
// tasks (AES-256-GCM): the first key seals, every key opens. The zero
// Keyring and a nil *Keyring hold no key.
type Keyring struct {
	seal *sealKey
	byID map[string]*sealKey
}

type sealKey struct {
	id   string
	aead cipher.AEAD
}

// MaxKeyFile bounds a key file: 64 KiB (about a thousand keys).
const MaxKeyFile = 64 << 10

// KeySize is the size of one key: 32 bytes (AES-256).
const KeySize = 32

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ParseKeys reads a key file: one key a line, "ID:KEY", where ID is 1 to
// 32 characters of A-Z, a-z, 0-9, _ and -, and KEY is 32 bytes in standard
// base64 (padded or not); blank lines and lines starting with # are
// ignored, as are spaces around a line. The first key seals; all of them
// open. An error names the line and what is wrong with it, never its
// content (which may be key material).
func ParseKeys(data []byte) (*Keyring, error) {
	if len(data) > MaxKeyFile {
		return nil, fmt.Errorf("key file is %d bytes, more than %d", len(data), MaxKeyFile)
	}
	k := &Keyring{byID: map[string]*sealKey{}}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, ":")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("line %d: want ID:KEY with an ID of 1 to 32 characters of A-Z, a-z, 0-9, _ and -", n+1)
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(enc, "="))
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("line %d: the key is not %d bytes in base64 (make one with: openssl rand -base64 32)", n+1, KeySize)
		}
		if _, dup := k.byID[id]; dup {
			return nil, fmt.Errorf("line %d: the key ID is used by an earlier line", n+1)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		sk := &sealKey{id: id, aead: aead}
		k.byID[id] = sk
		if k.seal == nil {
			k.seal = sk
		}
	}
	if k.seal == nil {
		return nil, errors.New("key file holds no key (want lines of ID:KEY)")
	}
	return k, nil
}

// LoadKeyFile reads and parses the key file at path (see ParseKeys). Only
// a regular file of at most MaxKeyFile bytes is read; a FIFO or a device
// is refused before it is opened.
func LoadKeyFile(path string) (*Keyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	k, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// SealingKeyID returns the ID of the key that seals ("" without a key).
func (k *Keyring) SealingKeyID() string {
	if k == nil || k.seal == nil {
		return ""
	}
	return k.seal.id
}

// sealPrefix starts every sealed value. A header value a caller may send
// never starts with it: validation refuses control characters (NUL among
// them), so a stored value is sealed exactly when it has the prefix.
const sealPrefix = "\x00rbseal1:"

// SealBinding is what a sealed value is bound to (GCM's additional data):
// a value sealed for one tenant's task and header does not open for
// another tenant, another task or another header.
type SealBinding struct {
	Tenant, TaskID, Header string
}

func (b SealBinding) aad() []byte {
	out := []byte("retrybroker task header v1\x00")
	for _, s := range [...]string{b.Tenant, b.TaskID, b.Header} {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	return out
}

// IsSealed reports whether a stored header value was sealed by Seal.
func IsSealed(v string) bool { return strings.HasPrefix(v, sealPrefix) }

// ErrNoKey reports a seal or open on a Keyring without keys.
var ErrNoKey = errors.New("no key to seal or open task secrets (--tasks-key-file)")

// Seal encrypts value with the sealing key and a fresh random nonce, bound
// to b. The result (sealPrefix, the key's ID, then base64 of nonce and
// ciphertext) is what is stored; it holds nothing of value in clear.
func (k *Keyring) Seal(value string, b SealBinding) (string, error) {
	if k == nil || k.seal == nil {
		return "", ErrNoKey
	}
	aead := k.seal.aead
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(value)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("tasks: seal nonce: %w", err)
	}
	buf = aead.Seal(buf, buf, []byte(value), b.aad())
	return sealPrefix + k.seal.id + ":" + base64.RawStdEncoding.EncodeToString(buf), nil
}

// KeyMissingError reports a sealed value whose key is not in the Keyring:
// it was removed from the key file while a task sealed with it was kept.
type KeyMissingError struct{ KeyID string }

func (e *KeyMissingError) Error() string {
	return fmt.Sprintf("the task's secrets were sealed with key %q, which --tasks-key-file no longer holds", e.KeyID)
}

// ErrSealBroken reports a sealed value that does not open: changed in
// storage, or moved from another task, tenant or header.
var ErrSealBroken = errors.New("a sealed task secret does not open: it was altered or belongs to another task")

// Open decrypts a value made by Seal for the same binding. It fails with
// ErrNoKey without keys, a *KeyMissingError when the value's key is not
// held, and ErrSealBroken for anything else; no error holds the value.
func (k *Keyring) Open(sealed string, b SealBinding) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return "", ErrSealBroken
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok || !keyIDPattern.MatchString(id) {
		return "", ErrSealBroken
	}
	if k == nil || k.seal == nil {
		return "", ErrNoKey
	}
	sk := k.byID[id]
	if sk == nil {
		return "", &KeyMissingError{KeyID: id}
	}
	raw, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(raw) < sk.aead.NonceSize()+sk.aead.Overhead() {
		return "", ErrSealBroken
	}
	n := sk.aead.NonceSize()
	plain, err := sk.aead.Open(nil, raw[:n], raw[n:], b.aad())
	if err != nil {
		return "", ErrSealBroken
	}
	return string(plain), nil
}
