/**
 * @retrybroker/client: TypeScript client of the retry broker.
 *
 * Durations are milliseconds throughout. See README.md.
 */
export { Code } from "@connectrpc/connect";
export { BrokerClient } from "./client.js";
export { AuthenticationError, BrokerError, CanceledError, DeadlineExceededError, InvalidArgumentError, PermissionDeniedError, RateLimitedError, UnavailableError, UnknownPolicyError, } from "./errors.js";
export { BrokerFetchError, createBrokerFetch, executeResultOf } from "./fetch.js";
export { defaultSleep, httpResultOf, transportErrorOf } from "./retry.js";
export { ExecuteResult, headerPairs, OUTCOMES, REASONS, TRANSPORT_ERROR_KINDS } from "./types.js";
//# sourceMappingURL=index.js.map