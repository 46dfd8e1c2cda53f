package engine

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzReadBody: readBody returns what io.ReadAll of the peek and the rest
// would, cut to the limit with the truncation flag, whatever the
// Content-Length claims (a size hint only) and however the reads are cut;
// with a true Content-Length within the limit, in one buffer of exactly
// that size.
func FuzzReadBody(f *testing.F) {
	f.Add([]byte("hello world"), 0, int64(11), int64(100), false)
	f.Add([]byte("hello world"), 5, int64(11), int64(100), true)
	f.Add([]byte("hello world"), 11, int64(11), int64(11), false)
	f.Add([]byte("hello world"), 3, int64(-1), int64(4), false)
	f.Add([]byte("hello world"), 0, int64(2), int64(100), true)
	f.Add([]byte("hello world"), 0, int64(50), int64(100), false)
	f.Add(bytes.Repeat([]byte("x"), 70000), 100, int64(-1), int64(1<<20), true)
	f.Fuzz(func(t *testing.T, data []byte, peekLen int, length, limit int64, oneByte bool) {
		if limit <= 0 || limit > 1<<22 || peekLen < 0 || peekLen > len(data) || length > 1<<22 {
			return
		}
		peek := append([]byte(nil), data[:peekLen]...)
		var r io.Reader = bytes.NewReader(data[peekLen:])
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		body, truncated, err := readBody(r, peek, length, limit)
		if err != nil {
			t.Fatal(err)
		}
		want, wantTrunc := data, false
		if int64(len(want)) > limit {
			want, wantTrunc = want[:limit], true
		}
		if !bytes.Equal(body, want) || truncated != wantTrunc {
			t.Fatalf("got %d bytes truncated %v, want %d bytes truncated %v", len(body), truncated, len(want), wantTrunc)
		}
		if length == int64(len(data)) && length <= limit && peekLen < len(data) && cap(body) != len(body) {
			t.Errorf("a true Content-Length of %d read into a buffer of %d", length, cap(body))
		}
	})
}

// TestReadBodyKeepsWhatArrivedOnError: a body that breaks off returns the
// bytes that arrived and the error.
func TestReadBodyKeepsWhatArrivedOnError(t *testing.T) {
	boom := errors.New("reset")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(boom))
	body, truncated, err := readBody(r, []byte("12"), 10, 100)
	if !errors.Is(err, boom) || string(body) != "12abc" || truncated {
		t.Fatalf("got %q %v %v", body, truncated, err)
	}
}

// BenchmarkReadBody reads a 4 MiB body with and without a Content-Length:
// with one, one allocation of the body's size (B/op ≈ 4 MiB).
func BenchmarkReadBody(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4<<20)
	for _, tc := range []struct {
		name   string
		length int64
	}{{"content-length", int64(len(data))}, {"unknown-length", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				body, _, err := readBody(bytes.NewReader(data), nil, tc.length, 64<<20)
				if err != nil || len(body) != len(data) {
					b.Fatal(err)
				}
			}
		})
	}
}
