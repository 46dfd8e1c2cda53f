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
export function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * httpResultOf reads status and headers from a fetch `Response`, any
 * `{status, headers}` object (node:http's IncomingMessage included: its
 * `statusCode` is read too), or a `[status, headers]` tuple.
 */
export function httpResultOf(value: unknown): HttpResult {
  if (Array.isArray(value) && typeof value[0] === "number") {
    return { status: value[0], headers: (value[1] ?? []) as HeadersLike };
  }
  if (typeof value === "object" && value !== null) {
    const v = value as { status?: unknown; statusCode?: unknown; headers?: unknown; rawHeaders?: unknown };
    const status =
      typeof v.status === "number" ? v.status : typeof v.statusCode === "number" ? v.statusCode : undefined;
    if (status !== undefined) {
      if (Array.isArray(v.rawHeaders)) {
        const raw = v.rawHeaders as string[];
        const pairs: [string, string][] = [];
        for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i] as string, raw[i + 1] as string]);
        return { status, headers: pairs };
      }
      return { status, headers: (v.headers ?? []) as HeadersLike };
    }
  }
  throw new TypeError(
    "cannot read an HTTP status from the result; return a Response, {status, headers} or pass inspect",
  );
}

const CODE_KINDS: Record<string, TransportErrorKind> = {
  ECONNREFUSED: "connection_refused",
  ECONNRESET: "connection_reset",
  EPIPE: "connection_reset",
  ECONNABORTED: "connection_reset",
  UND_ERR_SOCKET: "eof",
  UND_ERR_CLOSED: "eof",
  ERR_STREAM_PREMATURE_CLOSE: "eof",
  ETIMEDOUT: "timeout",
  ESOCKETTIMEDOUT: "timeout",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  UND_ERR_HEADERS_TIMEOUT: "timeout",
  UND_ERR_BODY_TIMEOUT: "timeout",
  ENOTFOUND: "dns_not_found",
  EAI_NONAME: "dns_not_found",
  EAI_NODATA: "dns_not_found",
  EAI_AGAIN: "dns_temporary",
  CERT_HAS_EXPIRED: "tls_certificate",
  CERT_NOT_YET_VALID: "tls_certificate",
  DEPTH_ZERO_SELF_SIGNED_CERT: "tls_certificate",
  SELF_SIGNED_CERT_IN_CHAIN: "tls_certificate",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "tls_certificate",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "tls_certificate",
  ERR_TLS_CERT_ALTNAME_INVALID: "tls_certificate",
  ERR_INVALID_URL: "invalid_url",
};

/**
 * transportErrorOf maps a thrown value to a transport error kind by its
 * Node/undici error code, walking `cause` chains and AggregateErrors (fetch
 * throws `TypeError("fetch failed")` with the socket error as its cause).
 * A `TimeoutError` (AbortSignal.timeout) is "timeout". An `AbortError` is
 * the caller's cancellation: undefined, so it is rethrown at once, as is
 * anything that is not a network failure. An unrecognised "fetch failed"
 * is "other" (not retryable).
 */
export function transportErrorOf(error: unknown): TransportErrorKind | undefined {
  const todo: unknown[] = [error];
  const seen = new Set<unknown>();
  let fetchFailed = false;
  while (todo.length > 0 && seen.size < 16) {
    const e = todo.shift();
    if (typeof e !== "object" || e === null || seen.has(e)) continue;
    seen.add(e);
    const { name, code, message, cause } = e as { name?: unknown; code?: unknown; message?: unknown; cause?: unknown };
    if (name === "AbortError") return undefined;
    if (name === "TimeoutError") return "timeout";
    if (typeof code === "string" && code in CODE_KINDS) return CODE_KINDS[code];
    if (e instanceof TypeError && message === "fetch failed") fetchFailed = true;
    if (cause !== undefined) todo.push(cause);
    if (e instanceof AggregateError) todo.push(...(e.errors as unknown[]));
  }
  return fetchFailed ? "other" : undefined;
}

/**
 * runRetry is the loop behind BrokerClient.retry: call fn, classify what
 * happened, then return, rethrow, or sleep and go again.
 */
export async function runRetry<T>(
  broker: Classifier,
  fn: (attempt: number) => Promise<T>,
  o: RetryOptions<T>,
): Promise<T> {
  const inspect = o.inspect ?? ((r: T) => httpResultOf(r));
  const kindOf = o.transportErrorOf ?? transportErrorOf;
  const sleep = o.sleep ?? defaultSleep;
  const monotonic = o.now ?? (() => performance.now());
  const wall = o.now ?? Date.now;
  if (o.deadlineMs !== undefined && !(o.deadlineMs >= 0)) {
    throw new RangeError("deadlineMs must be a non-negative number of milliseconds");
  }
  const deadlineAt = o.deadlineMs !== undefined ? monotonic() + o.deadlineMs : undefined;
  for (let attempt = 1; ; attempt++) {
    o.signal?.throwIfAborted();
    let result: T | undefined;
    let error: unknown;
    let failed = false;
    let info: HttpResult | undefined;
    let kind: TransportErrorKind | undefined;
    try {
      result = await fn(attempt);
      info = await inspect(result);
    } catch (e) {
      kind = kindOf(e);
      if (kind === undefined) throw e;
      error = e;
      failed = true;
    }
    const input: ClassifyInput = {
      method: o.method ?? "GET",
      attempt,
      ...(info && { status: info.status }),
      ...(info?.headers !== undefined && { headers: info.headers }),
      ...(info?.body !== undefined && { body: info.body }),
      ...(info === undefined && kind !== undefined && { transportError: kind }),
      ...(o.url !== undefined && { url: o.url }),
      ...(o.requestHeaders !== undefined && { requestHeaders: o.requestHeaders }),
      ...(o.provider !== undefined && { provider: o.provider }),
      ...(o.policy !== undefined && { policy: o.policy }),
      ...(o.now !== undefined && { now: o.now() }),
      ...(deadlineAt !== undefined && { deadline: wall() + (deadlineAt - monotonic()) }),
      ...(o.timeoutMs !== undefined && { timeoutMs: o.timeoutMs }),
      ...(o.signal !== undefined && { signal: o.signal }),
    };
    const decision = await broker.classify(input);
    if (decision.action !== "retry") {
      if (failed) throw error;
      return result as T;
    }
    const event: RetryEvent<T> = { attempt, decision };
    if (failed) event.error = error;
    else event.result = result as T;
    if (o.onRetry) await o.onRetry(event);
    else if (result instanceof Response && !result.bodyUsed) await result.body?.cancel().catch(() => {});
    await sleep(decision.delayMs ?? 0, o.signal);
  }
}
