/**
 * Plain TypeScript types of the retry broker contract (retrybroker.v1).
 *
 * Durations are milliseconds (numbers, possibly fractional) everywhere in
 * this package: `Decision.delayMs`, `Decision.hintMs`, `Attempt.durationMs`,
 * `ExecuteResult.retryAfterMs`, `timeoutMs`. Times are `Date`s or Unix
 * milliseconds.
 */
/** REASONS lists every Reason this client knows, as the proto enum names. */
export const REASONS = [
    "REASON_UNSPECIFIED",
    "REASON_SERVER_HINT",
    "REASON_BACKOFF",
    "REASON_SUCCESS",
    "REASON_STATUS_NOT_RETRYABLE",
    "REASON_UNSAFE_METHOD",
    "REASON_ATTEMPTS_EXHAUSTED",
    "REASON_HINT_EXCEEDS_MAX_DELAY",
    "REASON_DEADLINE_TOO_SHORT",
    "REASON_TRANSPORT_ERROR_NOT_RETRYABLE",
    "REASON_TRANSPORT_RETRY_DISABLED",
    "REASON_PROVIDER_FORBIDS_RETRY",
    "REASON_RETRY_BUDGET_EXHAUSTED",
    "REASON_GATE_CLOSED",
    "REASON_CANCELED",
    "REASON_BREAKER_OPEN",
    "REASON_SHUTTING_DOWN",
    "REASON_CREDENTIALS_UNAVAILABLE",
    "REASON_CREDENTIAL_REJECTED",
];
/** OUTCOMES lists every Outcome this client knows, as the proto enum names. */
export const OUTCOMES = [
    "OUTCOME_UNSPECIFIED",
    "OUTCOME_SUCCESS",
    "OUTCOME_NOT_RETRYABLE",
    "OUTCOME_ATTEMPTS_EXHAUSTED",
    "OUTCOME_HINT_EXCEEDS_MAX_DELAY",
    "OUTCOME_DEADLINE_TOO_SHORT",
    "OUTCOME_RETRY_BUDGET_EXHAUSTED",
    "OUTCOME_GATE_CLOSED",
    "OUTCOME_CANCELED",
    "OUTCOME_BREAKER_OPEN",
    "OUTCOME_SHUTTING_DOWN",
    "OUTCOME_CREDENTIALS_UNAVAILABLE",
];
/** TRANSPORT_ERROR_KINDS lists every TransportErrorKind. */
export const TRANSPORT_ERROR_KINDS = [
    "connection_refused",
    "connection_reset",
    "eof",
    "timeout",
    "dns_temporary",
    "dns_not_found",
    "tls_certificate",
    "canceled",
    "invalid_url",
    "destination_refused",
    "other",
    "body_incomplete",
    "response_headers_too_large",
];
/** ExecuteResult is the final response of an Execute call. */
export class ExecuteResult {
    /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
    status;
    /** Response headers in the order received, duplicates kept. */
    headers;
    /** Response body, up to the policy's limit. */
    body;
    /** True when the body was longer than returned (the policy's limit cut it). */
    bodyTruncated;
    /**
     * True when the upstream body ended early (reset, short Content-Length,
     * timeout while reading): `body` holds what arrived. Such a result never
     * has outcome "OUTCOME_SUCCESS".
     */
    bodyIncomplete;
    /** Every attempt, in order. */
    attempts;
    /** How the call ended, e.g. "OUTCOME_SUCCESS". */
    outcome;
    /**
     * When the caller may try again (ms), when the broker gave up early on a
     * hint, a deadline, a closed gate or an open breaker, or stopped while
     * waiting ("OUTCOME_SHUTTING_DOWN").
     */
    retryAfterMs;
    /** The hint reader that was used. */
    provider;
    constructor(init) {
        this.status = init.status;
        this.headers = init.headers ?? [];
        this.body = init.body ?? new Uint8Array(0);
        this.bodyTruncated = init.bodyTruncated ?? false;
        this.bodyIncomplete = init.bodyIncomplete ?? false;
        this.attempts = init.attempts ?? [];
        this.outcome = init.outcome;
        this.retryAfterMs = init.retryAfterMs;
        this.provider = init.provider ?? "";
    }
    /** header returns the first value of a header (case-insensitive). */
    header(name) {
        return this.headerValues(name)[0];
    }
    /** headerValues returns every value of a header (case-insensitive), in order. */
    headerValues(name) {
        const lname = name.toLowerCase();
        return this.headers.filter(([n]) => n.toLowerCase() === lname).map(([, v]) => v);
    }
    /** text decodes the body as UTF-8. */
    text() {
        return new TextDecoder().decode(this.body);
    }
    /** json parses the body as JSON. */
    json() {
        return JSON.parse(this.text());
    }
}
/** BODY_ENDS lists the ways a streamed body can end (the proto enum names). */
export const BODY_ENDS = [
    "BODY_END_UNSPECIFIED",
    "BODY_END_COMPLETE",
    "BODY_END_NO_RESPONSE",
    "BODY_END_UPSTREAM_ERROR",
    "BODY_END_IDLE_TIMEOUT",
    "BODY_END_SIZE_LIMIT",
    "BODY_END_TIMEOUT",
    "BODY_END_CANCELED",
    "BODY_END_SHUTTING_DOWN",
];
/**
 * headerPairs normalises HeadersLike to (name, value) pairs. A `Headers`
 * object yields lower-case names with repeated fields combined (as fetch
 * does), except set-cookie, one pair per cookie.
 */
export function headerPairs(headers) {
    if (headers === undefined)
        return [];
    if (Symbol.iterator in headers) {
        return Array.from(headers, ([n, v]) => [String(n), String(v)]);
    }
    return Object.entries(headers).map(([n, v]) => [n, String(v)]);
}
/** TASK_STATES lists every TaskState this client knows, as the proto enum names. */
export const TASK_STATES = [
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SCHEDULED",
    "TASK_STATE_WAITING",
    "TASK_STATE_RUNNING",
    "TASK_STATE_SUCCEEDED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELLED",
];
/** isFinalTaskState reports whether a task in state `s` is done (succeeded, failed or cancelled). */
export function isFinalTaskState(s) {
    return s === "TASK_STATE_SUCCEEDED" || s === "TASK_STATE_FAILED" || s === "TASK_STATE_CANCELLED";
}
//# sourceMappingURL=types.js.map