import type * as http2 from "node:http2";
import { type Interceptor, type Transport } from "@connectrpc/connect";
import { type RetryOptions } from "./retry.js";
import type { ClassifyInput, Decision, ExecuteInput, ExecuteResult, StreamEvent } from "./types.js";
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
    /**
     * executeStream has the broker send an HTTP request as execute does
     * (retrying by policy until a response is final) and streams the
     * response: a "head" event (status, headers, attempts so far), the body
     * as "chunk" events as the upstream sends them, then an "end" event
     * (outcome, bodyComplete, bodyEnd, trailers ...). A call without a final
     * response yields only "end". Nothing is retried once a body byte has
     * been sent; a body that breaks off ends with `bodyComplete: false`.
     * Stopping the iteration early (break, return, `signal`) cancels the call,
     * and the broker cancels the upstream request. `timeoutMs` bounds the
     * whole call, body included. Throws a BrokerError subclass when the
     * broker refuses the call (RateLimitedError when the tenant has as many
     * streams open as its policy allows) or the stream fails.
     */
    executeStream(input: ExecuteInput): AsyncGenerator<StreamEvent, void, undefined>;
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