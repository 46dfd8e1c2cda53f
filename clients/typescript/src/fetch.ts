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
export class BrokerFetchError extends TypeError {
  readonly result: ExecuteResult;

  constructor(result: ExecuteResult) {
    const last = result.attempts[result.attempts.length - 1];
    const why = last?.transportError ? `${last.transportError}: ${last.errorMessage}` : result.outcome;
    super(`fetch failed (through the retry broker: ${why})`);
    this.name = "BrokerFetchError";
    this.result = result;
  }
}

const results = new WeakMap<Response, ExecuteResult>();

/** executeResultOf returns the broker's ExecuteResult behind a Response from a broker fetch. */
export function executeResultOf(response: Response): ExecuteResult | undefined {
  return results.get(response);
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

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
export function createBrokerFetch(client: BrokerClient, options: BrokerFetchOptions = {}): BrokerFetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const method = request.method;
    const body = method === "GET" || method === "HEAD" ? undefined : new Uint8Array(await request.arrayBuffer());
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    signal?.throwIfAborted();
    const execInput: Parameters<BrokerClient["execute"]>[0] = {
      method,
      url: request.url,
      headers: request.headers,
    };
    if (body !== undefined && body.length > 0) execInput.body = body;
    if (options.policy !== undefined) execInput.policy = options.policy;
    if (options.provider !== undefined) execInput.provider = options.provider;
    if (options.timeoutMs !== undefined) execInput.timeoutMs = options.timeoutMs;
    if (options.overrides !== undefined) execInput.overrides = options.overrides;
    if (signal) execInput.signal = signal;
    const result = await client.execute(execInput);
    if (result.status === undefined) throw new BrokerFetchError(result);
    if (result.status < 200 || result.status > 599) {
      throw new BrokerFetchError(result);
    }
    const headers = new Headers();
    for (const [name, value] of result.headers) {
      try {
        headers.append(name, value);
      } catch {
        // A header a fetch Response cannot hold is left out (it stays in executeResultOf).
      }
    }
    const nullBody = NULL_BODY_STATUSES.has(result.status) || method === "HEAD";
    const response = new Response(nullBody ? null : result.body, { status: result.status, headers });
    Object.defineProperty(response, "url", { value: request.url });
    results.set(response, result);
    return response;
  };
}
