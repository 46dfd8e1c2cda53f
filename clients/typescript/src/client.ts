import type * as http2 from "node:http2";
import { type CallOptions, type Client, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { classifyRequest, decisionOf, executeRequest, executeResultOf } from "./convert.js";
import { brokerErrorFrom } from "./errors.js";
import { BrokerService } from "./gen/retrybroker/v1/broker_pb.js";
import { type RetryOptions, runRetry } from "./retry.js";
import type { CallOpts, ClassifyInput, Decision, ExecuteInput, ExecuteResult } from "./types.js";

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
export class BrokerClient {
  private readonly client: Client<typeof BrokerService>;
  private readonly session: Http2SessionManager | undefined;
  private readonly defaultPolicy: string;
  private readonly timeoutMs: number | undefined;

  /**
   * @param target the broker's address: "host:port" (e.g. "127.0.0.1:50051")
   *   or a base URL ("http://host:port", "https://host:port").
   */
  constructor(target: string, options: BrokerClientOptions = {}) {
    this.defaultPolicy = options.defaultPolicy ?? "";
    this.timeoutMs = options.timeoutMs;
    const interceptors: Interceptor[] = [...(options.interceptors ?? [])];
    if (options.apiKey) interceptors.unshift(bearer(options.apiKey));
    let transport = options.transport;
    if (transport === undefined) {
      const tls = options.tls ?? false;
      const baseUrl = /^https?:\/\//.test(target) ? target : `${tls ? "https" : "http"}://${target}`;
      const nodeOptions = typeof tls === "object" ? tls : {};
      this.session = new Http2SessionManager(baseUrl, {}, nodeOptions);
      transport = createGrpcTransport({ baseUrl, sessionManager: this.session, interceptors });
    } else if (interceptors.length > 0) {
      throw new TypeError("pass interceptors and apiKey to the transport you supply, not to BrokerClient");
    }
    this.client = createClient(BrokerService, transport);
  }

  /** close closes the HTTP/2 connection; in-flight calls fail. */
  close(): void {
    this.session?.abort();
  }

  /** Supports `using client = new BrokerClient(...)` (TypeScript 5.2+). */
  [Symbol.dispose](): void {
    this.close();
  }

  private callOptions(o: CallOpts): CallOptions {
    const opts: CallOptions = {};
    const t = o.timeoutMs ?? this.timeoutMs;
    if (t !== undefined) opts.timeoutMs = t;
    if (o.signal) opts.signal = o.signal;
    return opts;
  }

  /**
   * execute has the broker send an HTTP request, retrying by policy.
   *
   * Upstream failures are not exceptions: a final 503, a transport error or
   * an early give-up is an ExecuteResult whose `outcome` says how the call
   * ended (and `retryAfterMs` when the caller may try again). Throws a
   * BrokerError subclass when the broker refuses the call or cannot be
   * reached.
   */
  async execute(input: ExecuteInput): Promise<ExecuteResult> {
    const req = executeRequest(input, this.defaultPolicy);
    try {
      return executeResultOf(await this.client.execute(req, this.callOptions(input)));
    } catch (e) {
      throw brokerErrorFrom(e);
    }
  }

  /** classify asks the broker what to do about a response you got yourself. */
  async classify(input: ClassifyInput): Promise<Decision> {
    const req = classifyRequest(input, this.defaultPolicy);
    try {
      const resp = await this.client.classifyResponse(req, this.callOptions(input));
      return decisionOf(resp.decision);
    } catch (e) {
      throw brokerErrorFrom(e);
    }
  }

  /**
   * retry calls `fn` until the broker's rules say stop: each result (or
   * transport failure) is classified with its attempt number; on "retry" the
   * loop sleeps `delayMs` and calls `fn` again; on "do_not_retry" it returns
   * the last result or rethrows the last error. See RetryOptions.
   */
  retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions<T> = {}): Promise<T> {
    return runRetry(this, fn, options);
  }
}

function bearer(key: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };
}
