/**
 * Plain TypeScript types of the retry broker contract (retrybroker.v1).
 *
 * Durations are milliseconds (numbers, possibly fractional) everywhere in
 * this package: `Decision.delayMs`, `Decision.hintMs`, `Attempt.durationMs`,
 * `ExecuteResult.retryAfterMs`, `timeoutMs`. Times are `Date`s or Unix
 * milliseconds.
 */
/** Action says whether to send the request again. */
export type Action = "retry" | "do_not_retry" | "unspecified";
/** Reason explains a Decision; values are the proto enum names. */
export type Reason = "REASON_UNSPECIFIED" | "REASON_SERVER_HINT" | "REASON_BACKOFF" | "REASON_SUCCESS" | "REASON_STATUS_NOT_RETRYABLE" | "REASON_UNSAFE_METHOD" | "REASON_ATTEMPTS_EXHAUSTED" | "REASON_HINT_EXCEEDS_MAX_DELAY" | "REASON_DEADLINE_TOO_SHORT" | "REASON_TRANSPORT_ERROR_NOT_RETRYABLE" | "REASON_TRANSPORT_RETRY_DISABLED" | "REASON_PROVIDER_FORBIDS_RETRY" | "REASON_RETRY_BUDGET_EXHAUSTED" | "REASON_GATE_CLOSED" | "REASON_CANCELED" | (string & {});
/** Outcome says how an Execute call ended; values are the proto enum names. */
export type Outcome = "OUTCOME_UNSPECIFIED" | "OUTCOME_SUCCESS" | "OUTCOME_NOT_RETRYABLE" | "OUTCOME_ATTEMPTS_EXHAUSTED" | "OUTCOME_HINT_EXCEEDS_MAX_DELAY" | "OUTCOME_DEADLINE_TOO_SHORT" | "OUTCOME_RETRY_BUDGET_EXHAUSTED" | "OUTCOME_GATE_CLOSED" | "OUTCOME_CANCELED" | (string & {});
/**
 * TransportErrorKind is the kind of a failure that produced no HTTP
 * response: the lower-case suffix of the proto enum name (the spelling of
 * the conformance vectors).
 */
export type TransportErrorKind = "connection_refused" | "connection_reset" | "eof" | "timeout" | "dns_temporary" | "dns_not_found" | "tls_certificate" | "canceled" | "invalid_url" | "destination_refused" | "other";
/** TRANSPORT_ERROR_KINDS lists every TransportErrorKind. */
export declare const TRANSPORT_ERROR_KINDS: readonly TransportErrorKind[];
/** A header as a (name, value) pair. */
export type HeaderPair = [name: string, value: string];
/**
 * Headers as a caller may pass them: a `Headers` object, a record, or an
 * iterable of pairs (order and duplicates kept).
 */
export type HeadersLike = Headers | Record<string, string> | Iterable<readonly [string, string]>;
/** Decision is what the broker's rules say to do after one attempt. */
export interface Decision {
    /** RETRY or DO_NOT_RETRY. */
    action: Action;
    /** Milliseconds to wait before the next attempt; set only when retrying (0 = at once). */
    delayMs?: number;
    /** Lower-case header name (or "body:<field>") that set the delay; "" for backoff. */
    hintSource: string;
    /** The server's hint in ms, when valid; also when the broker gives up because it is too long. */
    hintMs?: number;
    /** Why, e.g. "REASON_SERVER_HINT". */
    reason: Reason;
    /** The hint reader that was used, e.g. "github". */
    provider: string;
}
/** Attempt records one send (or one refused chance to send) of Execute. */
export interface Attempt {
    /** 1-based. */
    number: number;
    /** When the request was sent. */
    startTime?: Date;
    /** From sending to the response headers (or the error), in ms. */
    durationMs: number;
    /** HTTP status; undefined when transportError is set. */
    status?: number;
    /** The kind of failure when there was no response. */
    transportError?: TransportErrorKind;
    /** The broker's description of that failure (URL redacted). */
    errorMessage: string;
    /** The decision taken after this attempt. */
    decision?: Decision;
    /** How long the broker waited before sending this attempt, in ms. */
    waitedMs: number;
}
/** ExecuteOverrides narrow the tenant's policy for one call (more conservative only). */
export interface ExecuteOverrides {
    /** Lowers max_retries (retries, so 0 means a single send). */
    maxRetries?: number;
    /** Lowers the longest hint the broker will wait for, in ms. */
    maxDelayMs?: number;
    /** Lowers the overall time of the call, waits included, in ms. */
    totalTimeoutMs?: number;
    /** Lowers the time of one attempt, in ms. */
    attemptTimeoutMs?: number;
    /** Lowers the number of body bytes returned. */
    maxResponseBody?: number;
}
/** HttpResult is what the retry loop needs from one HTTP response. */
export interface HttpResult {
    status: number;
    headers?: HeadersLike;
    /** Leading bytes of the body, for body-aware readers (discord, google). */
    body?: Uint8Array | string;
}
/** FieldViolation is one problem in a request the broker refused. */
export interface FieldViolation {
    field: string;
    description: string;
}
/** ExecuteResult is the final response of an Execute call. */
export declare class ExecuteResult {
    /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
    readonly status: number | undefined;
    /** Response headers in the order received, duplicates kept. */
    readonly headers: HeaderPair[];
    /** Response body, up to the policy's limit. */
    readonly body: Uint8Array;
    /** True when the body was longer than returned. */
    readonly bodyTruncated: boolean;
    /** Every attempt, in order. */
    readonly attempts: Attempt[];
    /** How the call ended, e.g. "OUTCOME_SUCCESS". */
    readonly outcome: Outcome;
    /** When the caller may try again (ms), when the broker gave up early on a hint, deadline or closed gate. */
    readonly retryAfterMs: number | undefined;
    /** The hint reader that was used. */
    readonly provider: string;
    constructor(
    /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
    status: number | undefined, 
    /** Response headers in the order received, duplicates kept. */
    headers: HeaderPair[], 
    /** Response body, up to the policy's limit. */
    body: Uint8Array, 
    /** True when the body was longer than returned. */
    bodyTruncated: boolean, 
    /** Every attempt, in order. */
    attempts: Attempt[], 
    /** How the call ended, e.g. "OUTCOME_SUCCESS". */
    outcome: Outcome, 
    /** When the caller may try again (ms), when the broker gave up early on a hint, deadline or closed gate. */
    retryAfterMs: number | undefined, 
    /** The hint reader that was used. */
    provider: string);
    /** header returns the first value of a header (case-insensitive). */
    header(name: string): string | undefined;
    /** headerValues returns every value of a header (case-insensitive), in order. */
    headerValues(name: string): string[];
    /** text decodes the body as UTF-8. */
    text(): string;
    /** json parses the body as JSON. */
    json(): unknown;
}
/**
 * headerPairs normalises HeadersLike to (name, value) pairs. A `Headers`
 * object yields lower-case names with repeated fields combined (as fetch
 * does), except set-cookie, one pair per cookie.
 */
export declare function headerPairs(headers: HeadersLike | undefined): HeaderPair[];
//# sourceMappingURL=types.d.ts.map