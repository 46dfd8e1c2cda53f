import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
/** gRPC status code names (UPPER_SNAKE, as in the gRPC spec), by code. */
const GRPC_CODE_NAMES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
};
/**
 * BrokerError is a failed broker RPC. `code` is the gRPC status code
 * (Connect's `Code`, same numbers), `codeName` its gRPC name (for example
 * "UNAUTHENTICATED"), `message` the broker's message, and `cause` the
 * underlying ConnectError.
 */
export class BrokerError extends Error {
    code;
    codeName;
    constructor(code, message, options) {
        super(message, options);
        this.name = new.target.name;
        this.code = code;
        this.codeName = GRPC_CODE_NAMES[code] ?? `CODE_${code}`;
    }
}
/** AuthenticationError: UNAUTHENTICATED, a missing or unknown API key. */
export class AuthenticationError extends BrokerError {
}
/** PermissionDeniedError: PERMISSION_DENIED, for example a refused destination. */
export class PermissionDeniedError extends BrokerError {
}
/**
 * InvalidArgumentError: INVALID_ARGUMENT, a malformed request.
 * `fieldViolations` come from the google.rpc.BadRequest status detail.
 */
export class InvalidArgumentError extends BrokerError {
    fieldViolations;
    constructor(code, message, fieldViolations, options) {
        super(code, message, options);
        this.fieldViolations = fieldViolations;
    }
}
/**
 * FailedPreconditionError: FAILED_PRECONDITION, the request cannot apply in
 * the current state; retryTask throws it for a task that is not failed. An
 * unknown policy throws its subclass UnknownPolicyError.
 */
export class FailedPreconditionError extends BrokerError {
}
/** UnknownPolicyError: FAILED_PRECONDITION, the tenant has no such policy. */
export class UnknownPolicyError extends FailedPreconditionError {
}
/**
 * NotFoundError: NOT_FOUND, a task that does not exist or belongs to another
 * tenant (the broker does not tell them apart, so task ids cannot be probed).
 */
export class NotFoundError extends BrokerError {
}
/**
 * RateLimitedError: RESOURCE_EXHAUSTED, pacing could not admit the call.
 * `retryDelayMs` comes from the google.rpc.RetryInfo detail.
 */
export class RateLimitedError extends BrokerError {
    retryDelayMs;
    constructor(code, message, retryDelayMs, options) {
        super(code, message, options);
        this.retryDelayMs = retryDelayMs;
    }
}
/** DeadlineExceededError: DEADLINE_EXCEEDED, the call's timeout ran out. */
export class DeadlineExceededError extends BrokerError {
}
/** UnavailableError: UNAVAILABLE, the broker could not be reached. */
export class UnavailableError extends BrokerError {
}
/** CanceledError: CANCELLED, the caller aborted the call (AbortSignal). */
export class CanceledError extends BrokerError {
}
/** brokerErrorFrom converts anything a Connect call threw to a BrokerError. */
export function brokerErrorFrom(reason) {
    if (reason instanceof BrokerError)
        return reason;
    const err = ConnectError.from(reason);
    const msg = err.rawMessage;
    const opts = { cause: err };
    switch (err.code) {
        case Code.Unauthenticated:
            return new AuthenticationError(err.code, msg, opts);
        case Code.PermissionDenied:
            return new PermissionDeniedError(err.code, msg, opts);
        case Code.InvalidArgument: {
            const violations = err
                .findDetails(BadRequestSchema)
                .flatMap((d) => d.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
            return new InvalidArgumentError(err.code, msg, violations, opts);
        }
        case Code.FailedPrecondition:
            return new UnknownPolicyError(err.code, msg, opts);
        case Code.NotFound:
            return new NotFoundError(err.code, msg, opts);
        case Code.ResourceExhausted: {
            const info = err.findDetails(RetryInfoSchema).find((d) => d.retryDelay !== undefined);
            const d = info?.retryDelay;
            const ms = d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : undefined;
            return new RateLimitedError(err.code, msg, ms, opts);
        }
        case Code.DeadlineExceeded:
            return new DeadlineExceededError(err.code, msg, opts);
        case Code.Unavailable:
            return new UnavailableError(err.code, msg, opts);
        case Code.Canceled:
            return new CanceledError(err.code, msg, opts);
        default:
            return new BrokerError(err.code, msg, opts);
    }
}
//# sourceMappingURL=errors.js.map