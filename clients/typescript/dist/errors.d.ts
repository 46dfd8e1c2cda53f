import { Code } from "@connectrpc/connect";
import type { FieldViolation } from "./types.js";
/**
 * BrokerError is a failed broker RPC. `code` is the gRPC status code
 * (Connect's `Code`, same numbers), `codeName` its gRPC name (for example
 * "UNAUTHENTICATED"), `message` the broker's message, and `cause` the
 * underlying ConnectError.
 */
export declare class BrokerError extends Error {
    readonly code: Code;
    readonly codeName: string;
    constructor(code: Code, message: string, options?: {
        cause?: unknown;
    });
}
/** AuthenticationError: UNAUTHENTICATED, a missing or unknown API key. */
export declare class AuthenticationError extends BrokerError {
}
/** PermissionDeniedError: PERMISSION_DENIED, for example a refused destination. */
export declare class PermissionDeniedError extends BrokerError {
}
/**
 * InvalidArgumentError: INVALID_ARGUMENT, a malformed request.
 * `fieldViolations` come from the google.rpc.BadRequest status detail.
 */
export declare class InvalidArgumentError extends BrokerError {
    readonly fieldViolations: FieldViolation[];
    constructor(code: Code, message: string, fieldViolations: FieldViolation[], options?: {
        cause?: unknown;
    });
}
/**
 * FailedPreconditionError: FAILED_PRECONDITION, the request cannot apply in
 * the current state; retryTask throws it for a task that is not failed. An
 * unknown policy throws its subclass UnknownPolicyError.
 */
export declare class FailedPreconditionError extends BrokerError {
}
/** UnknownPolicyError: FAILED_PRECONDITION, the tenant has no such policy. */
export declare class UnknownPolicyError extends FailedPreconditionError {
}
/**
 * NotFoundError: NOT_FOUND, a task that does not exist or belongs to another
 * tenant (the broker does not tell them apart, so task ids cannot be probed).
 */
export declare class NotFoundError extends BrokerError {
}
/**
 * RateLimitedError: RESOURCE_EXHAUSTED, pacing could not admit the call.
 * `retryDelayMs` comes from the google.rpc.RetryInfo detail.
 */
export declare class RateLimitedError extends BrokerError {
    readonly retryDelayMs: number | undefined;
    constructor(code: Code, message: string, retryDelayMs: number | undefined, options?: {
        cause?: unknown;
    });
}
/** DeadlineExceededError: DEADLINE_EXCEEDED, the call's timeout ran out. */
export declare class DeadlineExceededError extends BrokerError {
}
/** UnavailableError: UNAVAILABLE, the broker could not be reached. */
export declare class UnavailableError extends BrokerError {
}
/** CanceledError: CANCELLED, the caller aborted the call (AbortSignal). */
export declare class CanceledError extends BrokerError {
}
/** brokerErrorFrom converts anything a Connect call threw to a BrokerError. */
export declare function brokerErrorFrom(reason: unknown): BrokerError;
//# sourceMappingURL=errors.d.ts.map