package tasks

import (
	"errors"
	"testing"
)

// FuzzParsePageToken: any string either names a position whose token is
// exactly the input, or is ErrBadPageToken; nothing panics.
func FuzzParsePageToken(f *testing.F) {
	for _, s := range []string{"", encodePageToken(1), encodePageToken(1 << 62), "MA", "LTE", "not-a-token!", "MDAx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		n, err := parsePageToken(tok)
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadPageToken) {
				t.Fatalf("%q: %v", tok, err)
			}
		case tok == "":
			if n != 0 {
				t.Fatalf("empty token named %d", n)
			}
		case n <= 0 || encodePageToken(n) != tok:
			t.Fatalf("%q parsed to %d, whose token is %q", tok, n, encodePageToken(n))
		}
	})
}
