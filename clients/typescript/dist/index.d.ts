/**
 * @retrybroker/client: TypeScript client of the retry broker.
 *
 * Durations are milliseconds throughout. See README.md.
 */
export { BrokerClient } from "./client.js";
export type { BrokerClientOptions, CallOpts, ClassifyInput, ExecuteInput } from "./client.js";
export { createBrokerFetch, executeResultOf, BrokerFetchError } from "./fetch.js";
export type { BrokerFetch, BrokerFetchOptions } from "./fetch.js";
export { defaultSleep, httpResultOf, transportErrorOf } from "./retry.js";
export type { Classifier, RetryEvent, RetryOptions } from "./retry.js";
export { AuthenticationError, BrokerError, CanceledError, DeadlineExceededError, InvalidArgumentError, PermissionDeniedError, RateLimitedError, UnavailableError, UnknownPolicyError, } from "./errors.js";
export { ExecuteResult, TRANSPORT_ERROR_KINDS, headerPairs } from "./types.js";
export type { Action, Attempt, Decision, ExecuteOverrides, FieldViolation, HeaderPair, HeadersLike, HttpResult, Outcome, Reason, TransportErrorKind, } from "./types.js";
export type { TimeLike } from "./convert.js";
export { Code } from "@connectrpc/connect";
//# sourceMappingURL=index.d.ts.map