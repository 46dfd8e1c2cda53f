package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTokenFile bounds what a token file may hold, in bytes.
const maxTokenFile = 4096

// Token is the SHA-256 of the admin token; the zero value means none is
// set (the admin view then answers loopback peers only).
type Token struct {
	hash [32]byte
	set  bool
}

// TokenFromHash returns the Token of a SHA-256.
func TokenFromHash(sum [32]byte) Token { return Token{hash: sum, set: true} }

// Set reports whether a token is set.
func (t Token) Set() bool { return t.set }

// matches reports, in constant time, whether the SHA-256 of token is t's.
func (t Token) matches(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return t.set && subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1
}

var errTokenFile = errors.New("want the SHA-256 of the token as 64 hex digits (printf %s \"$TOKEN\" | sha256sum), never the token itself")

// LoadTokenFile reads a file holding the SHA-256 of the admin token, as 64
// hex digits (printf %s "$TOKEN" | sha256sum; a trailing "-" as sha256sum
// prints it is ignored), as API keys are held in the configuration: the
// broker never holds the token itself. An empty path means no token. An
// error never repeats the file's content.
func LoadTokenFile(path string) (Token, error) {
	if path == "" {
		return Token{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Token{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return Token{}, err
	}
	if len(b) > maxTokenFile {
		return Token{}, errTokenFile
	}
	return ParseTokenHash(string(b))
}

// ParseTokenHash parses the SHA-256 of the admin token, as 64 hex digits
// (surrounding space and a trailing "-" are ignored).
func ParseTokenHash(s string) (Token, error) {
	v := strings.TrimSpace(s)
	v = strings.TrimSpace(strings.TrimSuffix(v, "-"))
	var t Token
	if len(v) != 64 {
		return t, errTokenFile
	}
	if _, err := hex.Decode(t.hash[:], []byte(v)); err != nil {
		return t, fmt.Errorf("%w", errTokenFile)
	}
	t.set = true
	return t, nil
}
