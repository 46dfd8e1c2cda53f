package engine

// stackReserve is how much stack an attempt needs below attemptOnce: the
// engine's frames, the HTTP client's and transport's, and the destination
// guard's (about 6 KiB), with room to spare.
const stackReserve = 8 << 10

// growStack makes the goroutine's stack hold stackReserve more bytes from
// here, growing it now, while it is shallow, if it must. Call it with 0:
// the index it reads keeps its frame from being optimized away.
//
// A gRPC handler often runs on a fresh goroutine (when every stream worker
// is busy), whose stack starts small. Without this, it grows deep in the
// HTTP client or the destination guard, where copying it means walking
// and adjusting some forty frames; here, about fifteen. On the overhead
// scenario's Execute at 16 and 256 callers, that growth was the largest
// single cost of the broker's own share (issue 22). On a goroutine whose
// stack is large enough already, it costs one frame's zeroing.
//
// It is called before each attempt is sent, not when a call starts: a
// call parked before its first attempt (a closed gate, a breaker) keeps
// the small stack it waits with. CockroachDB grows its request
// goroutines' stacks the same way (pkg/util/growstack).
//
//go:noinline
func growStack(i int) byte {
	var buf [stackReserve]byte
	return buf[i]
}
