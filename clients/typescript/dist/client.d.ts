import { type Interceptor, type Transport } from "@connectrpc/connect";
import type * as http2 from "node:http2";
import { type TimeLike } from "./convert.js";
import { type RetryOptions } from "./retry.js";
import type { Decision, ExecuteOverrides, ExecuteResult, HeadersLike, TransportErrorKind } from "./types.js";
/** Options of a BrokerClient. */
export interface BrokerClientOptions {
    /** The tenant's API key, sent as `authorization: Bearer <key>`. Omit for the dev tenant of `make run`. */
    apiKey?: string;
    /**
     * false (default) for plaintext HTTP/2, true for TLS with Node's default
     * roots, or Node TLS options (ca, cert, key for mTLS, servername, ...).
     */
    tls?: boolean | http2.SecureClientSessionOptions;
    /** Policy used when a call names none; default: the tenant's default policy. */
    defaultPolicy?: string;
    /** Default deadline of every RPC, in ms; a per-call `timeoutMs` overrides it. Default: none. */
    timeoutMs?: number;
    /** Extra Connect interceptors (logging, tracing). */
    interceptors?: Interceptor[];
    /** A ready transport, instead of the gRPC-over-HTTP/2 one built from `target` (tests, custom setups). */
    transport?: Transport;
}
/** Per-call options shared by every method. */
export interface CallOpts {
    /** Deadline of this call in ms (sent as the gRPC deadline). Default: the client's `timeoutMs`. */
    timeoutMs?: number;
    /** Aborts the call. */
    signal?: AbortSignal;
}
/** ExecuteInput describes the HTTP request the broker should make. */
export interface ExecuteInput extends CallOpts {
    /** HTTP method; default "GET". */
    method?: string;
    /** Absolute http(s) URL. */
    url: string;
    /** Request headers (order and duplicates kept). */
    headers?: HeadersLike;
    /** Request body; a string is sent as UTF-8. */
    body?: Uint8Array | ArrayBuffer | string | null;
    /** The tenant's policy name; default: the client's `defaultPolicy`. */
    policy?: string;
    /** Hint reader override, e.g. "github". */
    provider?: string;
    /** Narrow the policy for this call. */
    overrides?: ExecuteOverrides;
}
/** ClassifyInput describes a response (or transport failure) you got yourself. */
export interface ClassifyInput extends CallOpts {
    /** HTTP status, 100 to 599. Set exactly one of status and transportError. */
    status?: number;
    /** Response headers. */
    headers?: HeadersLike;
    /** HTTP method of the request; default "GET". */
    method?: string;
    /** 1-based number of the attempt that produced the response; default 1. */
    attempt?: number;
    /** Hint reader override. */
    provider?: string;
    /** The tenant's policy name. */
    policy?: string;
    /** Clock for absolute hints (default: the broker's). */
    now?: TimeLike;
    /** Leading bytes of the body, for body-aware readers (at most 64 KiB). */
    body?: Uint8Array | ArrayBuffer | string;
    /** The failure when there was no response, e.g. "connection_reset". */
    transportError?: TransportErrorKind;
    /** Headers the request was sent with (searched for the idempotency key). */
    requestHeaders?: HeadersLike;
    /** Request URL: picks the provider by host and shares the tenant's cooldown gate. */
    url?: string;
    /** When the logical call must end; a wait past it gives DO_NOT_RETRY / REASON_DEADLINE_TOO_SHORT. */
    deadline?: TimeLike;
}
/**
 * BrokerClient calls a retry broker over gRPC (HTTP/2), with Connect's
 * gRPC transport.
 *
 * The client never retries an RPC itself. Retrying is the broker's job, and
 * stacked retry layers multiply sends: 3 retries in each of two layers is
 * (1+3) x (1+3) = 16 sends to the upstream. Connect has no retry of its own,
 * and none is added here.
 */
export declare class BrokerClient {
    private readonly client;
    private readonly session;
    private readonly defaultPolicy;
    private readonly timeoutMs;
    /**
     * @param target the broker's address: "host:port" (e.g. "127.0.0.1:50051")
     *   or a base URL ("http://host:port", "https://host:port").
     */
    constructor(target: string, options?: BrokerClientOptions);
    /** close closes the HTTP/2 connection; in-flight calls fail. */
    close(): void;
    /** Supports `using client = new BrokerClient(...)` (TypeScript 5.2+). */
    [Symbol.dispose](): void;
    private callOptions;
    /**
     * execute has the broker send an HTTP request, retrying by policy.
     *
     * Upstream failures are not exceptions: a final 503, a transport error or
     * an early give-up is an ExecuteResult whose `outcome` says how the call
     * ended (and `retryAfterMs` when the caller may try again). Throws a
     * BrokerError subclass when the broker refuses the call or cannot be
     * reached.
     */
    execute(input: ExecuteInput): Promise<ExecuteResult>;
    /** classify asks the broker what to do about a response you got yourself. */
    classify(input: ClassifyInput): Promise<Decision>;
    /**
     * retry calls `fn` until the broker's rules say stop: each result (or
     * transport failure) is classified with its attempt number; on "retry" the
     * loop sleeps `delayMs` and calls `fn` again; on "do_not_retry" it returns
     * the last result or rethrows the last error. See RetryOptions.
     */
    retry<T>(fn: (attempt: number) => Promise<T>, options?: RetryOptions<T>): Promise<T>;
}
//# sourceMappingURL=client.d.ts.map