/**
 * @retrybroker/client: TypeScript client of the retry broker.
 *
 * Durations are milliseconds throughout. See README.md.
 */
export { Code } from "@connectrpc/connect";
export type { BrokerClientOptions } from "./client.js";
export { BrokerClient } from "./client.js";
export { AuthenticationError, BrokerError, CanceledError, DeadlineExceededError, FailedPreconditionError, InvalidArgumentError, NotFoundError, PermissionDeniedError, RateLimitedError, UnavailableError, UnknownPolicyError, } from "./errors.js";
export type { BrokerFetch, BrokerFetchOptions } from "./fetch.js";
export { BrokerBodyError, BrokerFetchError, createBrokerFetch, streamResultOf } from "./fetch.js";
export type { Classifier, RetryEvent, RetryOptions } from "./retry.js";
export { defaultSleep, httpResultOf, transportErrorOf } from "./retry.js";
export type { Action, Attempt, BodyEnd, BodyLike, CallOpts, ClassifyInput, CreateTaskInput, Decision, ExecuteInput, ExecuteOverrides, ExecuteResultInit, FieldViolation, HeaderPair, HeadersLike, HttpResult, ListTasksInput, Outcome, Reason, StreamEvent, StreamHead, StreamResult, Task, TaskPage, TaskResponse, TaskState, TimeLike, TransportErrorKind, } from "./types.js";
export { BODY_ENDS, ExecuteResult, headerPairs, isFinalTaskState, OUTCOMES, REASONS, TASK_STATES, TRANSPORT_ERROR_KINDS, } from "./types.js";
//# sourceMappingURL=index.d.ts.map