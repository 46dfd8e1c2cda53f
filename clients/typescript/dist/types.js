/**
 * Plain TypeScript types of the retry broker contract (retrybroker.v1).
 *
 * Durations are milliseconds (numbers, possibly fractional) everywhere in
 * this package: `Decision.delayMs`, `Decision.hintMs`, `Attempt.durationMs`,
 * `ExecuteResult.retryAfterMs`, `timeoutMs`. Times are `Date`s or Unix
 * milliseconds.
 */
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
];
/** ExecuteResult is the final response of an Execute call. */
export class ExecuteResult {
    status;
    headers;
    body;
    bodyTruncated;
    attempts;
    outcome;
    retryAfterMs;
    provider;
    constructor(
    /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
    status, 
    /** Response headers in the order received, duplicates kept. */
    headers, 
    /** Response body, up to the policy's limit. */
    body, 
    /** True when the body was longer than returned. */
    bodyTruncated, 
    /** Every attempt, in order. */
    attempts, 
    /** How the call ended, e.g. "OUTCOME_SUCCESS". */
    outcome, 
    /** When the caller may try again (ms), when the broker gave up early on a hint, deadline or closed gate. */
    retryAfterMs, 
    /** The hint reader that was used. */
    provider) {
        this.status = status;
        this.headers = headers;
        this.body = body;
        this.bodyTruncated = bodyTruncated;
        this.attempts = attempts;
        this.outcome = outcome;
        this.retryAfterMs = retryAfterMs;
        this.provider = provider;
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
//# sourceMappingURL=types.js.map