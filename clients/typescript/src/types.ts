/**
 * Plain TypeScript types of the retry broker contract (retrybroker.v1).
 *
 * Durations are milliseconds (numbers, possibly fractional) everywhere in
 * this package: `Decision.delayMs`, `Decision.hintMs`, `Attempt.durationMs`,
 * `ExecuteResult.retryAfterMs`, `timeoutMs`. Times are `Date`s or Unix
 * milliseconds.
 */

/** Action says whether to send the request again. */
export type Action = "retry" | "do_not_retry" | "unspecified";

/** REASONS lists every Reason this client knows, as the proto enum names. */
export const REASONS = [
  "REASON_UNSPECIFIED",
  "REASON_SERVER_HINT",
  "REASON_BACKOFF",
  "REASON_SUCCESS",
  "REASON_STATUS_NOT_RETRYABLE",
  "REASON_UNSAFE_METHOD",
  "REASON_ATTEMPTS_EXHAUSTED",
  "REASON_HINT_EXCEEDS_MAX_DELAY",
  "REASON_DEADLINE_TOO_SHORT",
  "REASON_TRANSPORT_ERROR_NOT_RETRYABLE",
  "REASON_TRANSPORT_RETRY_DISABLED",
  "REASON_PROVIDER_FORBIDS_RETRY",
  "REASON_RETRY_BUDGET_EXHAUSTED",
  "REASON_GATE_CLOSED",
  "REASON_CANCELED",
  "REASON_BREAKER_OPEN",
  "REASON_SHUTTING_DOWN",
  "REASON_CREDENTIALS_UNAVAILABLE",
  "REASON_CREDENTIAL_REJECTED",
] as const;

/**
 * Reason explains a Decision; values are the proto enum names. A newer
 * broker may send a reason this client does not know: it arrives as its
 * name, or as "REASON_<number>".
 */
export type Reason = (typeof REASONS)[number] | (string & {});

/** OUTCOMES lists every Outcome this client knows, as the proto enum names. */
export const OUTCOMES = [
  "OUTCOME_UNSPECIFIED",
  "OUTCOME_SUCCESS",
  "OUTCOME_NOT_RETRYABLE",
  "OUTCOME_ATTEMPTS_EXHAUSTED",
  "OUTCOME_HINT_EXCEEDS_MAX_DELAY",
  "OUTCOME_DEADLINE_TOO_SHORT",
  "OUTCOME_RETRY_BUDGET_EXHAUSTED",
  "OUTCOME_GATE_CLOSED",
  "OUTCOME_CANCELED",
  "OUTCOME_BREAKER_OPEN",
  "OUTCOME_SHUTTING_DOWN",
  "OUTCOME_CREDENTIALS_UNAVAILABLE",
] as const;

/** Outcome says how an Execute call ended; values are the proto enum names (open, as Reason). */
export type Outcome = (typeof OUTCOMES)[number] | (string & {});

/**
 * TransportErrorKind is the kind of a failure that produced no (complete)
 * HTTP response: the lower-case suffix of the proto enum name (the spelling
 * of the conformance vectors). "body_incomplete" is the one kind that comes
 * with a status: the response headers arrived but the body ended early.
 */
export type TransportErrorKind =
  | "connection_refused"
  | "connection_reset"
  | "eof"
  | "timeout"
  | "dns_temporary"
  | "dns_not_found"
  | "tls_certificate"
  | "canceled"
  | "invalid_url"
  | "destination_refused"
  | "other"
  | "body_incomplete"
  | "response_headers_too_large";

/** TRANSPORT_ERROR_KINDS lists every TransportErrorKind. */
export const TRANSPORT_ERROR_KINDS: readonly TransportErrorKind[] = [
  "connection_refused",
  "connection_reset",
  "eof",
  "timeout",
  "dns_temporary",
  "dns_not_found",
  "tls_certificate",
  "canceled",
  "invalid_url",
  "destination_refused",
  "other",
  "body_incomplete",
  "response_headers_too_large",
];

/** A time as a caller may pass it: a Date or Unix milliseconds. */
export type TimeLike = Date | number;

/** A request body as a caller may pass it; a string is sent as UTF-8. */
export type BodyLike = Uint8Array | ArrayBuffer | string;

/** A header as a (name, value) pair. */
export type HeaderPair = [name: string, value: string];

/**
 * Headers as a caller may pass them: a `Headers` object, a record, or an
 * iterable of pairs (order and duplicates kept).
 */
export type HeadersLike = Headers | Record<string, string> | Iterable<readonly [string, string]>;

/** Decision is what the broker's rules say to do after one attempt. */
export interface Decision {
  /** RETRY or DO_NOT_RETRY. */
  action: Action;
  /** Milliseconds to wait before the next attempt; set only when retrying (0 = at once). */
  delayMs?: number;
  /** Lower-case header name (or "body:<field>") that set the delay; "" for backoff. */
  hintSource: string;
  /** The server's hint in ms, when valid; also when the broker gives up because it is too long. */
  hintMs?: number;
  /** Why, e.g. "REASON_SERVER_HINT". */
  reason: Reason;
  /** The hint reader that was used, e.g. "github". */
  provider: string;
  /**
   * The provider catalog rule that decided, e.g. "openai/insufficient_quota";
   * "" when the header readers and the standard rules decided.
   */
  rule: string;
}

/** Attempt records one send (or one refused chance to send) of Execute. */
export interface Attempt {
  /** 1-based. */
  number: number;
  /** When the request was sent. */
  startTime?: Date;
  /** From sending to the response headers (or the error), in ms. */
  durationMs: number;
  /**
   * HTTP status; undefined when there was no response. An attempt whose body
   * broke off has both a status and transportError "body_incomplete".
   */
  status?: number;
  /** The kind of failure when there was no (complete) response. */
  transportError?: TransportErrorKind;
  /** The broker's description of that failure (URL redacted). */
  errorMessage: string;
  /** The decision taken after this attempt. */
  decision?: Decision;
  /** How long the broker waited before sending this attempt, in ms. */
  waitedMs: number;
  /** True when the attempt went out as the single trial call of a learning cooldown gate or a half-open breaker. */
  probe: boolean;
}

/** ExecuteOverrides narrow the tenant's policy for one call (more conservative only). */
export interface ExecuteOverrides {
  /** Lowers max_retries (retries, so 0 means a single send). */
  maxRetries?: number;
  /** Lowers the longest hint the broker will wait for, in ms. */
  maxDelayMs?: number;
  /** Lowers the overall time of the call, waits included, in ms. */
  totalTimeoutMs?: number;
  /** Lowers the time of one attempt, in ms. */
  attemptTimeoutMs?: number;
  /** Lowers the number of body bytes returned. */
  maxResponseBody?: number;
}

/** HttpResult is what the retry loop needs from one HTTP response. */
export interface HttpResult {
  status: number;
  headers?: HeadersLike;
  /** Leading bytes of the body, for body-aware readers (discord, google). */
  body?: Uint8Array | string;
}

/** FieldViolation is one problem in a request the broker refused. */
export interface FieldViolation {
  field: string;
  description: string;
}

/** The fields of an ExecuteResult, as its constructor takes them. */
export interface ExecuteResultInit {
  /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
  status?: number | undefined;
  /** Response headers in the order received, duplicates kept. Default: none. */
  headers?: HeaderPair[];
  /** Response body, up to the policy's limit. Default: empty. */
  body?: Uint8Array;
  /** True when the body was longer than returned (the policy's limit cut it). Default: false. */
  bodyTruncated?: boolean;
  /** True when the upstream body ended early (reset, short Content-Length, read timeout). Default: false. */
  bodyIncomplete?: boolean;
  /** Every attempt, in order. Default: none. */
  attempts?: Attempt[];
  /** How the call ended, e.g. "OUTCOME_SUCCESS". */
  outcome: Outcome;
  /** When the caller may try again (ms). */
  retryAfterMs?: number | undefined;
  /** The hint reader that was used. Default: "". */
  provider?: string;
}

/** ExecuteResult is the final response of an Execute call. */
export class ExecuteResult {
  /** Final HTTP status; undefined when the last attempt ended in a transport error or nothing was sent. */
  readonly status: number | undefined;
  /** Response headers in the order received, duplicates kept. */
  readonly headers: HeaderPair[];
  /** Response body, up to the policy's limit. */
  readonly body: Uint8Array;
  /** True when the body was longer than returned (the policy's limit cut it). */
  readonly bodyTruncated: boolean;
  /**
   * True when the upstream body ended early (reset, short Content-Length,
   * timeout while reading): `body` holds what arrived. Such a result never
   * has outcome "OUTCOME_SUCCESS".
   */
  readonly bodyIncomplete: boolean;
  /** Every attempt, in order. */
  readonly attempts: Attempt[];
  /** How the call ended, e.g. "OUTCOME_SUCCESS". */
  readonly outcome: Outcome;
  /**
   * When the caller may try again (ms), when the broker gave up early on a
   * hint, a deadline, a closed gate or an open breaker, or stopped while
   * waiting ("OUTCOME_SHUTTING_DOWN").
   */
  readonly retryAfterMs: number | undefined;
  /** The hint reader that was used. */
  readonly provider: string;

  constructor(init: ExecuteResultInit) {
    this.status = init.status;
    this.headers = init.headers ?? [];
    this.body = init.body ?? new Uint8Array(0);
    this.bodyTruncated = init.bodyTruncated ?? false;
    this.bodyIncomplete = init.bodyIncomplete ?? false;
    this.attempts = init.attempts ?? [];
    this.outcome = init.outcome;
    this.retryAfterMs = init.retryAfterMs;
    this.provider = init.provider ?? "";
  }

  /** header returns the first value of a header (case-insensitive). */
  header(name: string): string | undefined {
    return this.headerValues(name)[0];
  }

  /** headerValues returns every value of a header (case-insensitive), in order. */
  headerValues(name: string): string[] {
    const lname = name.toLowerCase();
    return this.headers.filter(([n]) => n.toLowerCase() === lname).map(([, v]) => v);
  }

  /** text decodes the body as UTF-8. */
  text(): string {
    return new TextDecoder().decode(this.body);
  }

  /** json parses the body as JSON. */
  json(): unknown {
    return JSON.parse(this.text()) as unknown;
  }
}

/** BODY_ENDS lists the ways a streamed body can end (the proto enum names). */
export const BODY_ENDS = [
  "BODY_END_UNSPECIFIED",
  "BODY_END_COMPLETE",
  "BODY_END_NO_RESPONSE",
  "BODY_END_UPSTREAM_ERROR",
  "BODY_END_IDLE_TIMEOUT",
  "BODY_END_SIZE_LIMIT",
  "BODY_END_TIMEOUT",
  "BODY_END_CANCELED",
  "BODY_END_SHUTTING_DOWN",
] as const;

/** BodyEnd says how a streamed body ended; a newer broker may send a value not listed. */
export type BodyEnd = (typeof BODY_ENDS)[number] | (string & {});

/** StreamHead is the final response of an ExecuteStream call, before its body. */
export interface StreamHead {
  /** The final HTTP status. */
  status: number;
  /** Response headers in the order received, duplicates kept. */
  headers: HeaderPair[];
  /** The attempts so far; the last one is the attempt being streamed. */
  attempts: Attempt[];
  /** The hint reader that was used. */
  provider: string;
}

/** StreamResult is how an ExecuteStream call ended: the broker's last message. */
export interface StreamResult {
  /** Every attempt, in order. */
  attempts: Attempt[];
  /** How the call ended; never "OUTCOME_SUCCESS" when the body did not complete. */
  outcome: Outcome;
  /** When the caller may try again (ms), when the broker gave up early. */
  retryAfterMs?: number;
  /** True only when the whole upstream body was streamed. */
  bodyComplete: boolean;
  /** How the body ended, e.g. "BODY_END_IDLE_TIMEOUT". */
  bodyEnd: BodyEnd;
  /** Why the body did not complete (URL redacted); "" when it did. */
  errorMessage: string;
  /** The upstream's HTTP trailers, in order. */
  trailers: HeaderPair[];
  /** The number of body bytes the broker streamed. */
  bodyBytes: number;
  /** The hint reader that was used. */
  provider: string;
}

/**
 * StreamEvent is one message of an ExecuteStream call: one "head" (when a
 * response is final), "chunk"s of the body in order, then always one "end"
 * (alone when the call ended without a final response).
 */
export type StreamEvent =
  | { type: "head"; head: StreamHead }
  | { type: "chunk"; data: Uint8Array }
  | { type: "end"; result: StreamResult };

/**
 * headerPairs normalises HeadersLike to (name, value) pairs. A `Headers`
 * object yields lower-case names with repeated fields combined (as fetch
 * does), except set-cookie, one pair per cookie.
 */
export function headerPairs(headers: HeadersLike | undefined): HeaderPair[] {
  if (headers === undefined) return [];
  if (Symbol.iterator in headers) {
    return Array.from(headers as Iterable<readonly [string, string]>, ([n, v]) => [String(n), String(v)] as HeaderPair);
  }
  return Object.entries(headers).map(([n, v]) => [n, String(v)] as HeaderPair);
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
  body?: BodyLike | null;
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
  body?: BodyLike;
  /** The failure when there was no response, e.g. "connection_reset". */
  transportError?: TransportErrorKind;
  /** Headers the request was sent with (searched for the idempotency key). */
  requestHeaders?: HeadersLike;
  /** Request URL: picks the provider by host and shares the tenant's cooldown gate. */
  url?: string;
  /** When the logical call must end; a wait past it gives DO_NOT_RETRY / REASON_DEADLINE_TOO_SHORT. */
  deadline?: TimeLike;
}

/** TASK_STATES lists every TaskState this client knows, as the proto enum names. */
export const TASK_STATES = [
  "TASK_STATE_UNSPECIFIED",
  "TASK_STATE_SCHEDULED",
  "TASK_STATE_WAITING",
  "TASK_STATE_RUNNING",
  "TASK_STATE_SUCCEEDED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELLED",
] as const;

/**
 * TaskState is where a task is in its life; values are the proto enum names
 * (open, as Reason). "TASK_STATE_SUCCEEDED", "TASK_STATE_FAILED" and
 * "TASK_STATE_CANCELLED" are final: a watch ends after one of them.
 */
export type TaskState = (typeof TASK_STATES)[number] | (string & {});

/** isFinalTaskState reports whether a task in state `s` is done (succeeded, failed or cancelled). */
export function isFinalTaskState(s: TaskState): boolean {
  return s === "TASK_STATE_SUCCEEDED" || s === "TASK_STATE_FAILED" || s === "TASK_STATE_CANCELLED";
}

/** TaskResponse is the final HTTP response of a task. */
export interface TaskResponse {
  /** The HTTP status. */
  status: number;
  /** Response headers in the order received, duplicates kept. */
  headers: HeaderPair[];
  /** The response body, up to the policy's max_response_body. */
  body: Uint8Array;
  /** True when the body was longer and was cut. */
  bodyTruncated: boolean;
  /** True when the upstream broke the body off. */
  bodyIncomplete: boolean;
}

/** Task is a deferred call the broker keeps durably, and what became of it. Times are the broker's. */
export interface Task {
  /** Names the task within its tenant. */
  taskId: string;
  /** The policy the task runs under ("": the tenant's default). */
  policy: string;
  /** Where the task is, e.g. "TASK_STATE_WAITING". */
  state: TaskState;
  /** The earliest time the task runs. */
  notBefore?: Date;
  /** When an unfinished task fails; undefined means never. */
  giveUpAfter?: Date;
  /** Every send over every dispatch, in order. */
  attempts: Attempt[];
  /** The final HTTP response, once there is one. */
  response?: TaskResponse;
  /** How the last dispatch ended; "OUTCOME_UNSPECIFIED" before the first. */
  outcome: Outcome;
  /** When the task was created. */
  createTime?: Date;
  /** When the task last changed. */
  updateTime?: Date;
  /** When a scheduled or waiting task is due next; undefined for a final task. */
  nextRunTime?: Date;
  /** Why a waiting task waits, e.g. "gate_closed". */
  waitReason: string;
  /**
   * The value of the policy's idempotency header that every send of the
   * task carries (the request's own, or one the broker generated).
   */
  idempotencyKey: string;
}

/** CreateTaskInput is the request of a task (as for execute) and when to run it. */
export interface CreateTaskInput extends ExecuteInput {
  /**
   * Names the task in the tenant: 1 to 128 characters of [A-Za-z0-9_-]. A
   * second createTask with the same id returns the first task unchanged.
   * Default: the broker generates one.
   */
  taskId?: string;
  /** The earliest time the task runs (a Date or Unix ms); default now. */
  notBefore?: TimeLike;
  /** When an unfinished task becomes failed; after notBefore. Default: never. */
  giveUpAfter?: TimeLike;
}

/** ListTasksInput selects the tasks listTasks and listTasksPage return. */
export interface ListTasksInput extends CallOpts {
  /** Only tasks in this state ("TASK_STATE_WAITING" or "waiting"); default every state. */
  state?: TaskState;
  /** Tasks per RPC, 1 to 1000; default the broker's (100). */
  pageSize?: number;
}

/** TaskPage is one page of listTasksPage. */
export interface TaskPage {
  /** The page's tasks, oldest first. */
  tasks: Task[];
  /** Pass it as pageToken for the next page; "" on the last. */
  nextPageToken: string;
}
