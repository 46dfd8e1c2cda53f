package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"
	"time"
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

// budgetRoom serves waiting calls first in, first out: a later, smaller
// call does not pass a queued one; a queued call whose context ends lets
// the ones behind it in; room given back is never lost.
func TestBudgetRoomOrderAndCancel(t *testing.T) {
	var r budgetRoom
	r.free.Store(10)
	if !r.tryTake(8) {
		t.Fatal("8 of 10 bytes were not taken")
	}
	bigCtx, cancelBig := context.WithCancel(context.Background())
	defer cancelBig()
	big, small := make(chan error, 1), make(chan error, 1)
	go func() { big <- r.take(bigCtx, 6) }()
	waitUntil(t, func() bool { return r.waiting.Load() == 1 })
	go func() { small <- r.take(context.Background(), 2) }()
	waitUntil(t, func() bool { return r.waiting.Load() == 2 })
	if r.tryTake(1) {
		t.Error("a call took room past two queued ones")
	}
	select {
	case <-small:
		t.Fatal("the smaller call passed the queued larger one")
	default:
	}
	cancelBig() // the front leaves: the 2 bytes free fit the next
	if err := <-big; !errors.Is(err, context.Canceled) {
		t.Fatalf("big: %v", err)
	}
	if err := <-small; err != nil {
		t.Fatalf("small: %v", err)
	}
	r.give(8)
	r.give(2)
	if got := r.free.Load(); got != 10 || r.waiting.Load() != 0 {
		t.Fatalf("free %d waiting %d, want 10 and 0", got, r.waiting.Load())
	}
}

// Under many concurrent takes and gives (some canceled), the room never
// goes below zero or above its size, and all of it is free at the end.
func TestBudgetRoomConcurrent(t *testing.T) {
	const size = 100
	var r budgetRoom
	r.free.Store(size)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				n := int64(1 + (g*7+i)%40)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
				var err error
				if !r.tryTake(n) {
					err = r.take(ctx, n)
				}
				cancel()
				if f := r.free.Load(); f < 0 || f > size {
					t.Errorf("free %d outside [0, %d]", f, size)
				}
				if err == nil {
					r.give(n)
				}
			}
		})
	}
	wg.Wait()
	if got := r.free.Load(); got != size || r.waiting.Load() != 0 || len(r.queue) != 0 {
		t.Fatalf("free %d waiting %d queue %d, want %d, 0, 0", got, r.waiting.Load(), len(r.queue), size)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
