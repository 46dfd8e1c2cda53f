import type { BrokerClient } from "./client.js";
import type { Attempt, ExecuteOverrides, Outcome, StreamResult } from "./types.js";
/** Options of createBrokerFetch. */
export interface BrokerFetchOptions {
    /** The tenant's policy name for every request. */
    policy?: string;
    /** Hint reader override for every request. */
    provider?: string;
    /** Deadline of each call in ms, body included (default: the client's timeoutMs). */
    timeoutMs?: number;
    /** Narrow the policy for every request. */
    overrides?: ExecuteOverrides;
}
/** A fetch-compatible function: `(input: RequestInfo | URL, init?: RequestInit) => Promise<Response>`. */
export type BrokerFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
/**
 * BrokerFetchError is thrown (as fetch throws a TypeError) when the call
 * ended without a final HTTP response: every attempt failed in transport,
 * or a closed cooldown gate or open breaker stopped the call. `result` has
 * the attempts and the outcome.
 */
export declare class BrokerFetchError extends TypeError {
    readonly result: {
        attempts: Attempt[];
        outcome: Outcome;
        retryAfterMs?: number | undefined;
    };
    constructor(result: {
        attempts: Attempt[];
        outcome: Outcome;
        retryAfterMs?: number | undefined;
    });
}
/**
 * BrokerBodyError is the error of a response body that did not complete
 * (a TypeError, as fetch's own body errors are): the upstream broke it off,
 * it went idle, it reached the policy's byte or time limit, or the broker
 * shut down. `result` is the broker's end of the stream; it is undefined
 * when the stream itself failed first (`cause` is then the BrokerError).
 */
export declare class BrokerBodyError extends TypeError {
    readonly result: StreamResult | undefined;
    constructor(message: string, result?: StreamResult, options?: {
        cause?: unknown;
    });
}
/**
 * streamResultOf returns the broker's end of the stream behind a Response
 * from a broker fetch (attempts, outcome, bodyComplete, bodyEnd, trailers,
 * bodyBytes), once its body has been read to the end; undefined before.
 */
export declare function streamResultOf(response: Response): StreamResult | undefined;
/**
 * createBrokerFetch returns a `fetch` that sends every request through the
 * broker's ExecuteStream, so existing code switches with one line:
 *
 *     const fetch = createBrokerFetch(new BrokerClient("127.0.0.1:50051"));
 *
 * The request (method, URL, headers, body) is read from `input`/`init` as
 * fetch would (hop-by-hop headers and Host are left out); the broker
 * retries it by policy. The final upstream response comes back as a
 * standard `Response` as soon as its status and headers arrive, whatever
 * its status; its body is a `ReadableStream` fed as the upstream sends it
 * (server-sent events arrive one by one, large downloads flow through),
 * with backpressure. A body that does not complete errors with a
 * BrokerBodyError (a TypeError). `init.signal` aborts the call at any time,
 * before or during the body, and canceling the body does the same; the
 * broker then cancels the upstream request. `streamResultOf(response)`
 * gives the attempts and outcome once the body has been read. A call that
 * ended with no HTTP response rejects with a BrokerFetchError (a TypeError,
 * like fetch's network errors); a broker that refuses the call rejects
 * with its BrokerError. Redirects are not followed by the client.
 */
export declare function createBrokerFetch(client: BrokerClient, options?: BrokerFetchOptions): BrokerFetch;
//# sourceMappingURL=fetch.d.ts.map