import type { BrokerClient } from "./client.js";
import type { Attempt, ExecuteOverrides, Outcome, StreamEvent, StreamResult } from "./types.js";

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
export class BrokerFetchError extends TypeError {
  readonly result: { attempts: Attempt[]; outcome: Outcome; retryAfterMs?: number | undefined };

  constructor(result: { attempts: Attempt[]; outcome: Outcome; retryAfterMs?: number | undefined }) {
    const last = result.attempts[result.attempts.length - 1];
    const why = last?.transportError ? `${last.transportError}: ${last.errorMessage}` : result.outcome;
    super(`fetch failed (through the retry broker: ${why})`);
    this.name = "BrokerFetchError";
    this.result = result;
  }
}

/**
 * BrokerBodyError is the error of a response body that did not complete
 * (a TypeError, as fetch's own body errors are): the upstream broke it off,
 * it went idle, it reached the policy's byte or time limit, or the broker
 * shut down. `result` is the broker's end of the stream; it is undefined
 * when the stream itself failed first (`cause` is then the BrokerError).
 */
export class BrokerBodyError extends TypeError {
  readonly result: StreamResult | undefined;

  constructor(message: string, result?: StreamResult, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BrokerBodyError";
    this.result = result;
  }
}

const results = new WeakMap<Response, StreamResult>();

/**
 * streamResultOf returns the broker's end of the stream behind a Response
 * from a broker fetch (attempts, outcome, bodyComplete, bodyEnd, trailers,
 * bodyBytes), once its body has been read to the end; undefined before.
 */
export function streamResultOf(response: Response): StreamResult | undefined {
  return results.get(response);
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** Request headers that are hop-by-hop or set by the broker itself (it refuses them). */
const DROPPED_REQUEST_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "upgrade",
  "proxy-authorization",
]);

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
export function createBrokerFetch(client: BrokerClient, options: BrokerFetchOptions = {}): BrokerFetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const method = request.method;
    const body = method === "GET" || method === "HEAD" ? undefined : new Uint8Array(await request.arrayBuffer());
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    signal?.throwIfAborted();
    const headers: [string, string][] = [];
    request.headers.forEach((value, name) => {
      if (!DROPPED_REQUEST_HEADERS.has(name)) headers.push([name, value]);
    });
    const execInput: Parameters<BrokerClient["executeStream"]>[0] = { method, url: request.url, headers };
    if (body !== undefined && body.length > 0) execInput.body = body;
    if (options.policy !== undefined) execInput.policy = options.policy;
    if (options.provider !== undefined) execInput.provider = options.provider;
    if (options.timeoutMs !== undefined) execInput.timeoutMs = options.timeoutMs;
    if (options.overrides !== undefined) execInput.overrides = options.overrides;
    if (signal) execInput.signal = signal;
    const events = client.executeStream(execInput);
    const next = async (): Promise<IteratorResult<StreamEvent, void>> => {
      try {
        return await events.next();
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw e;
      }
    };
    const first = await next();
    if (first.done) throw new TypeError("fetch failed (the broker closed the stream without a response)");
    if (first.value.type === "end") throw new BrokerFetchError(first.value.result);
    if (first.value.type !== "head") throw new TypeError("fetch failed (the broker sent a body before the head)");
    const head = first.value.head;
    if (head.status < 200 || head.status > 599) {
      await events.return(undefined);
      throw new BrokerFetchError({ attempts: head.attempts, outcome: "OUTCOME_UNSPECIFIED" });
    }
    const responseHeaders = new Headers();
    for (const [name, value] of head.headers) {
      try {
        responseHeaders.append(name, value);
      } catch {
        // A header a fetch Response cannot hold is left out.
      }
    }
    let response: Response | undefined;
    const finish = (result: StreamResult): void => {
      if (response) results.set(response, result);
    };
    // pull reads the next event into the stream: chunks are enqueued, the
    // end closes it (or errors it when the body did not complete).
    const pull = async (controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> => {
      for (;;) {
        let ev: IteratorResult<StreamEvent, void>;
        try {
          ev = await next();
        } catch (e) {
          controller.error(
            signal?.aborted
              ? e
              : new BrokerBodyError("response body incomplete: the stream failed", undefined, { cause: e }),
          );
          return;
        }
        if (ev.done) {
          controller.error(new BrokerBodyError("response body incomplete: the stream closed before its end"));
          return;
        }
        if (ev.value.type === "chunk") {
          if (ev.value.data.length === 0) continue;
          controller.enqueue(ev.value.data);
          return;
        }
        if (ev.value.type === "end") {
          const r = ev.value.result;
          finish(r);
          if (r.bodyComplete) controller.close();
          else controller.error(new BrokerBodyError(`response body incomplete (${r.bodyEnd}): ${r.errorMessage}`, r));
          return;
        }
        controller.error(new BrokerBodyError("response body incomplete: a second head arrived"));
        return;
      }
    };
    const nullBody = NULL_BODY_STATUSES.has(head.status) || method === "HEAD";
    let stream: ReadableStream<Uint8Array> | null = null;
    if (!nullBody) {
      stream = new ReadableStream<Uint8Array>(
        {
          pull,
          cancel: async () => {
            await events.return(undefined);
          },
        },
        { highWaterMark: 0 },
      );
    }
    response = new Response(stream, { status: head.status, headers: responseHeaders });
    Object.defineProperty(response, "url", { value: request.url });
    if (nullBody) {
      // No body to read: take the end now, so streamResultOf has it.
      for (let ev = await next(); !ev.done; ev = await next()) {
        if (ev.value.type === "end") finish(ev.value.result);
      }
    }
    return response;
  };
}
