/**
 * @retrybroker/client: TypeScript client of the retry broker.
 *
 * Durations are milliseconds throughout. See README.md.
 */
export { BrokerClient } from "./client.js";
export { createBrokerFetch, executeResultOf, BrokerFetchError } from "./fetch.js";
export { defaultSleep, httpResultOf, transportErrorOf } from "./retry.js";
export { AuthenticationError, BrokerError, CanceledError, DeadlineExceededError, InvalidArgumentError, PermissionDeniedError, RateLimitedError, UnavailableError, UnknownPolicyError, } from "./errors.js";
export { ExecuteResult, TRANSPORT_ERROR_KINDS, headerPairs } from "./types.js";
export { Code } from "@connectrpc/connect";
//# sourceMappingURL=index.js.map