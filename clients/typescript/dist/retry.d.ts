import type { ClassifyInput, Decision, HeadersLike, HttpResult, TransportErrorKind } from "./types.js";
/** Anything that can classify; BrokerClient is one. */
export interface Classifier {
    classify(input: ClassifyInput): Promise<Decision>;
}
/** RetryEvent is passed to `onRetry` before the loop waits. */
export interface RetryEvent<T> {
    /** Number of the attempt that just failed (1-based). */
    attempt: number;
    /** The broker's decision (action "retry"). */
    decision: Decision;
    /** The failed attempt's result, when fn returned one. */
    result?: T;
    /** What fn threw, when it threw. */
    error?: unknown;
}
/** Options of BrokerClient.retry. */
export interface RetryOptions<T> {
    /** HTTP method fn uses; unsafe methods retry only with an idempotency key in requestHeaders. Default "GET". */
    method?: string;
    /** Request URL: picks the provider by host and shares the tenant's cooldown gate with Execute. */
    url?: string;
    /** Headers fn sends. */
    requestHeaders?: HeadersLike;
    /** Hint reader override. */
    provider?: string;
    /** The tenant's policy name. */
    policy?: string;
    /**
     * Time the whole loop may take, waits included, in ms; the broker stops
     * retries that would run past it. Measured on the monotonic
     * `performance.now()` (or on `now`, when given), so a wall-clock step does
     * not change it; sent as `Date.now()` plus what is left.
     */
    deadlineMs?: number;
    /**
     * Turns fn's result into status, headers and (optionally) leading body
     * bytes. Default: `httpResultOf` (fetch `Response`, `{status, headers}`
     * objects, `[status, headers]` tuples).
     */
    inspect?: (result: T) => HttpResult | Promise<HttpResult>;
    /** Maps a thrown value to a transport error kind, or undefined to rethrow it at once. Default: `transportErrorOf`. */
    transportErrorOf?: (error: unknown) => TransportErrorKind | undefined;
    /** Waits `ms` milliseconds (inject a fake in tests). Default: a timer, aborted by `signal`. */
    sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
    /**
     * Clock in Unix ms (inject a fake in tests). When given, it measures the
     * deadline and its reading is sent as `now`, so absolute hints (HTTP-dates,
     * reset times) are read against it; otherwise the broker's clock reads hints.
     */
    now?: () => number;
    /**
     * Called before each wait. By default a fetch `Response` that is about to
     * be retried has its body cancelled, so its connection is released.
     */
    onRetry?: (event: RetryEvent<T>) => void | Promise<void>;
    /** Aborts the loop (between attempts, and during waits). */
    signal?: AbortSignal;
    /** Deadline of each ClassifyResponse RPC, in ms. Default: the client's timeoutMs. */
    timeoutMs?: number;
}
/** defaultSleep waits ms milliseconds, or rejects when signal aborts. */
export declare function defaultSleep(ms: number, signal?: AbortSignal): Promise<void>;
/**
 * httpResultOf reads status and headers from a fetch `Response`, any
 * `{status, headers}` object (node:http's IncomingMessage included: its
 * `statusCode` is read too), or a `[status, headers]` tuple.
 */
export declare function httpResultOf(value: unknown): HttpResult;
/**
 * transportErrorOf maps a thrown value to a transport error kind by its
 * Node/undici error code, walking `cause` chains and AggregateErrors (fetch
 * throws `TypeError("fetch failed")` with the socket error as its cause).
 * A `TimeoutError` (AbortSignal.timeout) is "timeout". An `AbortError` is
 * the caller's cancellation: undefined, so it is rethrown at once, as is
 * anything that is not a network failure. An unrecognised "fetch failed"
 * is "other" (not retryable).
 */
export declare function transportErrorOf(error: unknown): TransportErrorKind | undefined;
/**
 * runRetry is the loop behind BrokerClient.retry: call fn, classify what
 * happened, then return, rethrow, or sleep and go again.
 */
export declare function runRetry<T>(broker: Classifier, fn: (attempt: number) => Promise<T>, o: RetryOptions<T>): Promise<T>;
//# sourceMappingURL=retry.d.ts.map