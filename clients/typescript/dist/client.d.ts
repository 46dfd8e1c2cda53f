import type * as http2 from "node:http2";
import { type Interceptor, type Transport } from "@connectrpc/connect";
import { type RetryOptions } from "./retry.js";
import type { CallOpts, ClassifyInput, CreateTaskInput, Decision, ExecuteInput, ExecuteResult, ListTasksInput, StreamEvent, Task, TaskPage } from "./types.js";
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
    /**
     * streamOptions returns the call options of a server stream and its
     * deadline timer (clear it however the stream ends). The deadline is sent
     * as grpc-timeout and kept with a timer of our own that aborts `abort`:
     * Connect's own deadline timer outlives a stream that is canceled early.
     */
    private streamOptions;
    /** classify asks the broker what to do about a response you got yourself. */
    classify(input: ClassifyInput): Promise<Decision>;
    /**
     * retry calls `fn` until the broker's rules say stop: each result (or
     * transport failure) is classified with its attempt number; on "retry" the
     * loop sleeps `delayMs` and calls `fn` again; on "do_not_retry" it returns
     * the last result or rethrows the last error. See RetryOptions.
     */
    retry<T>(fn: (attempt: number) => Promise<T>, options?: RetryOptions<T>): Promise<T>;
    /**
     * createTask hands an HTTP request to the broker as a task: the broker
     * stores it durably and sends it, through the same engine and policy as
     * execute, when it is due (`notBefore`) and its gate allows; a closed gate
     * or an open breaker makes it wait ("TASK_STATE_WAITING") without using
     * up its attempts. Every send carries the same idempotency key (the
     * request's own value of the policy's idempotency header, or one the
     * broker generates), so a POST task is retried safely. Resolves to the
     * stored task; a second createTask with the same `taskId` resolves to the
     * first task unchanged. A sensitive header (Authorization, Cookie,
     * X-Api-Key) is refused with InvalidArgumentError: it would be stored;
     * let the broker hold the credential. A broker without task storage
     * throws a BrokerError with code Unimplemented. `timeoutMs` bounds the
     * RPC, not the task.
     */
    createTask(input: CreateTaskInput): Promise<Task>;
    /** getTask returns the caller's task; NotFoundError when it does not exist or is another tenant's. */
    getTask(taskId: string, opts?: CallOpts): Promise<Task>;
    /** cancelTask cancels the caller's task unless it is final and returns it (a final task unchanged); NotFoundError as getTask. */
    cancelTask(taskId: string, opts?: CallOpts): Promise<Task>;
    /**
     * retryTask schedules the caller's failed task again (due now, same
     * idempotency key) and returns it. FailedPreconditionError for a task
     * that is not failed; NotFoundError as getTask.
     */
    retryTask(taskId: string, opts?: CallOpts): Promise<Task>;
    /**
     * listTasksPage returns one page of the caller's tasks, oldest first: the
     * first with `pageToken` "" (default), the next with the previous page's
     * `nextPageToken`. A token the broker did not issue is InvalidArgumentError.
     */
    listTasksPage(input?: ListTasksInput & {
        pageToken?: string;
    }): Promise<TaskPage>;
    /**
     * listTasks iterates over the caller's tasks, oldest first, fetching one
     * page (`pageSize`) per RPC as the loop reaches it; leaving the loop early
     * fetches no more. `timeoutMs` bounds each page's RPC.
     *
     *     for await (const task of client.listTasks({ state: "TASK_STATE_WAITING" })) { ... }
     */
    listTasks(input?: ListTasksInput): AsyncGenerator<Task, void, undefined>;
    /**
     * watchTask yields the caller's task now and again on every change, and
     * ends after a final state. Leaving the loop early (break, return,
     * `signal`) cancels the stream. `timeoutMs` (default: the client's)
     * bounds the whole watch: give one as long as the task may wait. Throws
     * NotFoundError as getTask, DeadlineExceededError when the timeout runs
     * out first.
     *
     *     for await (const task of client.watchTask(id, { timeoutMs: 600_000 })) console.log(task.state);
     */
    watchTask(taskId: string, opts?: CallOpts): AsyncGenerator<Task, void, undefined>;
}
//# sourceMappingURL=client.d.ts.map