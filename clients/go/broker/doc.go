// Package broker is the Go client of the retry broker
// (github.com/retrybroker/retrybroker), a gRPC service that makes outbound
// HTTP calls on your behalf and retries them by your tenant's policy and
// the provider's rate-limit hints.
//
// Four ways to use it:
//
//   - Execute (or RoundTripper, a drop-in http.RoundTripper) sends the
//     request through the broker, which retries it and returns the final
//     response with a record of every attempt.
//   - Classify and ClassifyError ask the broker about a response (or
//     failure) you got yourself: retry or not, after how long, and why.
//   - Retry is a small loop around your own HTTP call, driven by Classify.
//   - CreateTask hands the call to the broker as a durable task that it
//     sends when it is due and its gate allows; GetTask, ListTasks,
//     CancelTask, WatchTask and RetryTask follow it (see docs/tasks.md).
//
// Connect with New; with no options, a loopback target such as
// "127.0.0.1:50051" (the `make run` broker) uses plaintext, any other TLS.
// WithAPIKey authenticates as a tenant.
//
// # No retries of the RPC itself
//
// The client never retries Execute or Classify, and it dials with
// grpc.WithDisableRetry so that no gRPC service config (a default one, or
// one pushed by DNS) can turn gRPC's own retries on. Retry layers multiply:
// 3 retries in the client around 3 retries in the broker would be 16 sends
// to an upstream that is already struggling. When an RPC fails (for
// example UNAVAILABLE because the broker is restarting), the *Error reaches
// you and you decide. gRPC still replays a call that the server provably
// never received (a refused stream), which cannot duplicate a send.
//
// # Errors
//
// A failed RPC is an *Error with its gRPC code, message, field violations
// and retry delay; IsUnauthenticated, IsPermissionDenied, IsInvalidArgument,
// IsUnknownPolicy, IsFailedPrecondition, IsNotFound and IsRateLimited test
// for the codes the broker uses.
// Upstream failures are not RPC failures: a final 503 is a response, and a
// final transport failure is a *TransportError carrying the Result.
//
// # Deadlines
//
// The context's deadline becomes the gRPC deadline. The broker plans with
// it: it does not start a wait that would end after it, and returns at once
// with OutcomeDeadlineTooShort and the server's hint in Result.RetryAfter.
//
// # Testing
//
// Package brokertest runs an in-process broker on an in-memory listener,
// with a fake clock and canned upstream replies, so that code using this
// package can be tested without a network or real waits.
package broker
