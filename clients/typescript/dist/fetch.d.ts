import type { BrokerClient } from "./client.js";
import type { ExecuteOverrides, ExecuteResult } from "./types.js";
/** Options of createBrokerFetch. */
export interface BrokerFetchOptions {
    /** The tenant's policy name for every request. */
    policy?: string;
    /** Hint reader override for every request. */
    provider?: string;
    /** Deadline of each Execute call, in ms (default: the client's timeoutMs). */
    timeoutMs?: number;
    /** Narrow the policy for every request. */
    overrides?: ExecuteOverrides;
}
/** A fetch-compatible function: `(input: RequestInfo | URL, init?: RequestInit) => Promise<Response>`. */
export type BrokerFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
/**
 * BrokerFetchError is thrown (as fetch throws a TypeError) when Execute
 * ended without a final HTTP response: every attempt failed in transport, or
 * a closed cooldown gate stopped the call. `result` has the attempts.
 */
export declare class BrokerFetchError extends TypeError {
    readonly result: ExecuteResult;
    constructor(result: ExecuteResult);
}
/** executeResultOf returns the broker's ExecuteResult behind a Response from a broker fetch. */
export declare function executeResultOf(response: Response): ExecuteResult | undefined;
/**
 * createBrokerFetch returns a `fetch` that sends every request through the
 * broker's Execute, so existing code switches with one line:
 *
 *     const fetch = createBrokerFetch(new BrokerClient("127.0.0.1:50051"));
 *
 * The request (method, URL, headers, body) is read from `input`/`init` as
 * fetch would; `init.signal` aborts the Execute call. The final upstream
 * response comes back as a standard `Response` (status, headers, body);
 * `executeResultOf(response)` gives the attempts and outcome. A call that
 * ended with no HTTP response rejects with a BrokerFetchError (a TypeError,
 * like fetch's network errors); a broker that refuses the call rejects with
 * its BrokerError. Bodies are buffered (the broker's limits apply) and
 * redirects are not followed by the client.
 */
export declare function createBrokerFetch(client: BrokerClient, options?: BrokerFetchOptions): BrokerFetch;
//# sourceMappingURL=fetch.d.ts.map