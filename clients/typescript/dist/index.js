/**
 * @retrybroker/client: TypeScript client of the retry broker.
 *
 * Durations are milliseconds throughout. See README.md.
 */
export { Code } from "@connectrpc/connect";
export { BrokerClient } from "./client.js";
export { AuthenticationError, BrokerError, CanceledError, DeadlineExceededError, FailedPreconditionError, InvalidArgumentError, NotFoundError, PermissionDeniedError, RateLimitedError, UnavailableError, UnknownPolicyError, } from "./errors.js";
export { BrokerBodyError, BrokerFetchError, createBrokerFetch, streamResultOf } from "./fetch.js";
export { defaultSleep, httpResultOf, transportErrorOf } from "./retry.js";
export { BODY_ENDS, ExecuteResult, headerPairs, isFinalTaskState, OUTCOMES, REASONS, TASK_STATES, TRANSPORT_ERROR_KINDS, } from "./types.js";
//# sourceMappingURL=index.js.map