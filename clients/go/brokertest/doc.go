// Package brokertest runs a retry broker in process, for the tests of code
// that uses package broker: no network, no real waits.
//
// A Broker is the real broker (its gRPC service, retry engine and memory
// store) with three changes:
//
//   - it serves on an in-memory listener (bufconn); Client returns a
//     *broker.Client connected to it;
//   - its clock is fake: waits for backoff, server hints and cooldown gates
//     advance the clock at once, so a 30s Retry-After costs no time. Clock
//     reads and advances it;
//   - upstream HTTP requests go to a canned upstream, an http.RoundTripper
//     that answers scripted replies (Reply, Script) and records every
//     request with its fake arrival time (Requests). Nothing leaves the
//     process, so any URL may be used, and the destination guard that
//     refuses private addresses in a real broker does not apply.
//
// A test:
//
//	func TestFetch(t *testing.T) {
//		b := brokertest.New(t, brokertest.WithoutJitter())
//		b.Script("api.example.com/",
//			brokertest.Status(503, "Retry-After: 2"),
//			brokertest.Status(200))
//		hc := &http.Client{Transport: b.Client().RoundTripper()}
//		resp, err := hc.Get("https://api.example.com/items")
//		// resp.StatusCode == 200; len(b.Requests()) == 2; the second
//		// request arrived 2s (fake) after the first.
//	}
//
// Deadlines are moved onto the fake clock, keeping the time left: a call
// with 1.5s left is told that a 5s hint is too long, however far the fake
// clock has advanced. Cancellation stays real.
//
// The test tenant needs no API key. Its default policy is the broker's
// standard policy; PolicyOptions change it, and WithNamedPolicy adds
// others. Pass b.Clock() to broker.WithSleeper so that broker.Retry waits
// on the fake clock too.
//
// brokertest lives in the broker's own module because it runs the
// broker's internal packages; importing it compiles them into the test
// binary only.
package brokertest
