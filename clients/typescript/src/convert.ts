// Translation between this package's types and the generated messages.
//
// Pure functions, no I/O. Requests are built as plain objects
// (`MessageInitShape`), which Connect accepts wherever it takes a message;
// responses are read from the messages Connect returns. Execute and a
// streaming call share executeRequest and attemptOf.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Duration, DurationSchema, Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import {
  type ClassifyResponseRequestSchema,
  type CreateTaskRequestSchema,
  type ExecuteOverridesSchema,
  type ExecuteRequestSchema,
  type ListTasksRequestSchema,
  Action as PbAction,
  type Attempt as PbAttempt,
  BodyEnd as PbBodyEnd,
  type Decision as PbDecision,
  type ExecuteResponse as PbExecuteResponse,
  type ListTasksResponse as PbListTasksResponse,
  Outcome as PbOutcome,
  Reason as PbReason,
  type StreamEnd as PbStreamEnd,
  type StreamHead as PbStreamHead,
  type Task as PbTask,
  TaskState as PbTaskState,
  TransportError as PbTransportError,
} from "./gen/retrybroker/v1/broker_pb.js";
import {
  type Attempt,
  type BodyLike,
  type ClassifyInput,
  type CreateTaskInput,
  type Decision,
  type ExecuteInput,
  type ExecuteOverrides,
  ExecuteResult,
  type HeaderPair,
  type HeadersLike,
  headerPairs,
  type ListTasksInput,
  type StreamHead,
  type StreamResult,
  type Task,
  type TaskPage,
  type TaskResponse,
  type TaskState,
  type TimeLike,
  TRANSPORT_ERROR_KINDS,
  type TransportErrorKind,
} from "./types.js";

/** headersToProto returns the headers as HttpHeader init objects, in order, duplicates kept. */
export function headersToProto(h: HeadersLike | undefined): { name: string; value: string }[] {
  return headerPairs(h).map(([name, value]) => ({ name, value }));
}

/** bodyBytes returns a body as bytes: empty for undefined or null, UTF-8 for a string. */
export function bodyBytes(body: BodyLike | undefined | null): Uint8Array {
  if (body === undefined || body === null) return new Uint8Array(0);
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  return new Uint8Array(body);
}

/** splitMs returns milliseconds as whole seconds and nanoseconds in [0, 1e9). */
function splitMs(ms: number): { seconds: bigint; nanos: number } {
  let seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    seconds += 1;
    nanos -= 1e9;
  }
  return { seconds: BigInt(seconds), nanos };
}

/**
 * durationFromMs returns non-negative milliseconds as a Duration init
 * (nanosecond precision). Throws a RangeError for a negative or non-finite
 * value; `what` names the argument.
 */
export function durationFromMs(ms: number, what: string): MessageInitShape<typeof DurationSchema> {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`${what} must be a finite, non-negative number of milliseconds`);
  }
  return splitMs(ms);
}

/**
 * timestampOf returns a Date or Unix milliseconds as a Timestamp init.
 * Throws a RangeError for an invalid Date or a non-finite number.
 */
export function timestampOf(t: TimeLike, what: string): MessageInitShape<typeof TimestampSchema> {
  const ms = t instanceof Date ? t.getTime() : t;
  if (!Number.isFinite(ms)) throw new RangeError(`${what} must be a valid Date or Unix milliseconds`);
  return splitMs(ms);
}

/** msOf returns a Duration as milliseconds, or undefined when it is unset. */
export function msOf(d: Duration | undefined): number | undefined {
  return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

function dateOf(t: Timestamp | undefined): Date | undefined {
  return t === undefined ? undefined : new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6));
}

/**
 * transportErrorToProto returns the enum value of a kind ("timeout" or
 * "TRANSPORT_ERROR_TIMEOUT"). Throws a RangeError for a kind this client does
 * not know.
 */
export function transportErrorToProto(kind: TransportErrorKind | string): PbTransportError {
  let k = kind.trim().toLowerCase();
  if (k.startsWith("transport_error_")) k = k.slice("transport_error_".length);
  if (!(TRANSPORT_ERROR_KINDS as readonly string[]).includes(k)) {
    throw new RangeError(
      `unknown transport error ${JSON.stringify(kind)} (one of ${TRANSPORT_ERROR_KINDS.join(", ")})`,
    );
  }
  const v = (PbTransportError as unknown as Record<string, number>)[k.toUpperCase()];
  if (v === undefined) throw new RangeError(`unknown transport error ${JSON.stringify(kind)}`);
  return v as PbTransportError;
}

/** transportErrorOf returns the kind of an enum value; undefined for UNSPECIFIED, "transport_error_<n>" when unknown. */
function transportErrorOf(v: PbTransportError): TransportErrorKind | undefined {
  if (v === PbTransportError.UNSPECIFIED) return undefined;
  const name = PbTransportError[v] as string | undefined;
  return (name ? name.toLowerCase() : `transport_error_${v}`) as TransportErrorKind;
}

/** enumName returns the proto name of a value, or prefix + number when this client does not know it. */
function enumName(e: Record<number, string>, v: number, prefix: string): string {
  const name = e[v];
  return name === undefined ? `${prefix}${v}` : `${prefix}${name}`;
}

/** decisionOf returns a Decision message as a Decision; `delayMs` is set only when retrying. */
export function decisionOf(d: PbDecision | undefined): Decision {
  const action =
    d?.action === PbAction.RETRY ? "retry" : d?.action === PbAction.DO_NOT_RETRY ? "do_not_retry" : "unspecified";
  const out: Decision = {
    action,
    hintSource: d?.hintSource ?? "",
    reason: enumName(PbReason as unknown as Record<number, string>, d?.reason ?? 0, "REASON_"),
    provider: d?.provider ?? "",
    rule: d?.rule ?? "",
  };
  if (action === "retry") out.delayMs = msOf(d?.delay) ?? 0;
  const hint = msOf(d?.hint);
  if (hint !== undefined) out.hintMs = hint;
  return out;
}

/**
 * attemptOf returns an Attempt message as an Attempt. `status` is undefined
 * when there was no response; an attempt whose body broke off keeps its
 * status next to transportError "body_incomplete".
 */
export function attemptOf(a: PbAttempt): Attempt {
  const te = transportErrorOf(a.transportError);
  const out: Attempt = {
    number: a.number,
    durationMs: msOf(a.duration) ?? 0,
    errorMessage: a.errorMessage,
    waitedMs: msOf(a.waited) ?? 0,
    probe: a.probe,
  };
  const start = dateOf(a.startTime);
  if (start) out.startTime = start;
  if (a.statusCode !== 0) out.status = a.statusCode;
  if (te !== undefined) out.transportError = te;
  if (a.decision) out.decision = decisionOf(a.decision);
  return out;
}

/** outcomeOf returns an Outcome value's proto name ("OUTCOME_<n>" when unknown). */
export function outcomeOf(v: PbOutcome): string {
  return enumName(PbOutcome as unknown as Record<number, string>, v, "OUTCOME_");
}

/** executeResultOf returns an ExecuteResponse message as an ExecuteResult. */
export function executeResultOf(r: PbExecuteResponse): ExecuteResult {
  const resp = r.response;
  return new ExecuteResult({
    status: resp?.statusCode,
    headers: (resp?.headers ?? []).map((h) => [h.name, h.value] as HeaderPair),
    body: resp?.body ?? new Uint8Array(0),
    bodyTruncated: resp?.bodyTruncated ?? false,
    bodyIncomplete: resp?.bodyIncomplete ?? false,
    attempts: r.attempts.map(attemptOf),
    outcome: outcomeOf(r.outcome),
    retryAfterMs: msOf(r.retryAfter),
    provider: r.provider,
  });
}

/** streamHeadOf returns a StreamHead message as a StreamHead. */
export function streamHeadOf(h: PbStreamHead): StreamHead {
  return {
    status: h.statusCode,
    headers: h.headers.map((x) => [x.name, x.value] as HeaderPair),
    attempts: h.attempts.map(attemptOf),
    provider: h.provider,
  };
}

/** streamResultOf returns a StreamEnd message as a StreamResult. */
export function streamResultOf(e: PbStreamEnd): StreamResult {
  const out: StreamResult = {
    attempts: e.attempts.map(attemptOf),
    outcome: outcomeOf(e.outcome),
    bodyComplete: e.bodyComplete,
    bodyEnd: enumName(PbBodyEnd as unknown as Record<number, string>, e.bodyEnd, "BODY_END_"),
    errorMessage: e.errorMessage,
    trailers: e.trailers.map((x) => [x.name, x.value] as HeaderPair),
    bodyBytes: Number(e.bodyBytes),
    provider: e.provider,
  };
  const ra = msOf(e.retryAfter);
  if (ra !== undefined) out.retryAfterMs = ra;
  return out;
}

/** overridesInit returns the overrides as an ExecuteOverrides init; undefined fields stay unset. */
export function overridesInit(o: ExecuteOverrides): MessageInitShape<typeof ExecuteOverridesSchema> {
  return {
    ...(o.maxRetries !== undefined && { maxRetries: o.maxRetries }),
    ...(o.maxDelayMs !== undefined && { maxDelay: durationFromMs(o.maxDelayMs, "maxDelayMs") }),
    ...(o.totalTimeoutMs !== undefined && { totalTimeout: durationFromMs(o.totalTimeoutMs, "totalTimeoutMs") }),
    ...(o.attemptTimeoutMs !== undefined && {
      attemptTimeout: durationFromMs(o.attemptTimeoutMs, "attemptTimeoutMs"),
    }),
    ...(o.maxResponseBody !== undefined && { maxResponseBody: BigInt(o.maxResponseBody) }),
  };
}

/** executeRequest returns the request of an Execute (or ExecuteStream) call as a plain object. */
export function executeRequest(
  input: ExecuteInput,
  defaultPolicy: string,
): MessageInitShape<typeof ExecuteRequestSchema> {
  return {
    request: {
      method: input.method ?? "GET",
      url: input.url,
      headers: headersToProto(input.headers),
      body: bodyBytes(input.body),
    },
    policy: input.policy ?? defaultPolicy,
    provider: input.provider ?? "",
    ...(input.overrides && { overrides: overridesInit(input.overrides) }),
  };
}

/** classifyRequest returns the request of a ClassifyResponse call as a plain object. */
export function classifyRequest(
  input: ClassifyInput,
  defaultPolicy: string,
): MessageInitShape<typeof ClassifyResponseRequestSchema> {
  return {
    policy: input.policy ?? defaultPolicy,
    provider: input.provider ?? "",
    method: input.method ?? "GET",
    statusCode: input.status ?? 0,
    headers: headersToProto(input.headers),
    attempt: input.attempt ?? 1,
    body: bodyBytes(input.body),
    requestHeaders: headersToProto(input.requestHeaders),
    url: input.url ?? "",
    ...(input.transportError !== undefined && { transportError: transportErrorToProto(input.transportError) }),
    ...(input.now !== undefined && { now: timestampOf(input.now, "now") }),
    ...(input.deadline !== undefined && { deadline: timestampOf(input.deadline, "deadline") }),
  };
}

/**
 * taskStateToProto returns the enum value of a task state
 * ("TASK_STATE_WAITING" or "waiting"); undefined is UNSPECIFIED (every
 * state). Throws a RangeError for a state this client does not know.
 */
export function taskStateToProto(state: TaskState | undefined): PbTaskState {
  if (state === undefined) return PbTaskState.UNSPECIFIED;
  let k = state.trim().toUpperCase();
  if (k.startsWith("TASK_STATE_")) k = k.slice("TASK_STATE_".length);
  const v = (PbTaskState as unknown as Record<string, number>)[k];
  if (v === undefined) {
    throw new RangeError(`unknown task state ${JSON.stringify(state)}`);
  }
  return v as PbTaskState;
}

/** taskOf returns a Task message as a Task; unset times stay undefined. */
export function taskOf(t: PbTask): Task {
  const out: Task = {
    taskId: t.taskId,
    policy: t.policy,
    state: enumName(PbTaskState as unknown as Record<number, string>, t.state, "TASK_STATE_"),
    attempts: t.attempts.map(attemptOf),
    outcome: outcomeOf(t.outcome),
    waitReason: t.waitReason,
    idempotencyKey: t.idempotencyKey,
  };
  const times = {
    notBefore: dateOf(t.notBefore),
    giveUpAfter: dateOf(t.giveUpAfter),
    createTime: dateOf(t.createTime),
    updateTime: dateOf(t.updateTime),
    nextRunTime: dateOf(t.nextRunTime),
  };
  for (const [k, v] of Object.entries(times)) {
    if (v !== undefined) out[k as keyof typeof times] = v;
  }
  if (t.response) {
    const r = t.response;
    const resp: TaskResponse = {
      status: r.statusCode,
      headers: r.headers.map((h) => [h.name, h.value] as HeaderPair),
      body: r.body,
      bodyTruncated: r.bodyTruncated,
      bodyIncomplete: r.bodyIncomplete,
    };
    out.response = resp;
  }
  return out;
}

/** taskPageOf returns a ListTasksResponse message as a TaskPage. */
export function taskPageOf(r: PbListTasksResponse): TaskPage {
  return { tasks: r.tasks.map(taskOf), nextPageToken: r.nextPageToken };
}

/** createTaskRequest returns the request of a CreateTask call as a plain object. */
export function createTaskRequest(
  input: CreateTaskInput,
  defaultPolicy: string,
): MessageInitShape<typeof CreateTaskRequestSchema> {
  return {
    execute: executeRequest(input, defaultPolicy),
    taskId: input.taskId ?? "",
    ...(input.notBefore !== undefined && { notBefore: timestampOf(input.notBefore, "notBefore") }),
    ...(input.giveUpAfter !== undefined && { giveUpAfter: timestampOf(input.giveUpAfter, "giveUpAfter") }),
  };
}

/**
 * listTasksRequest returns the request of one ListTasks page as a plain
 * object. Throws a RangeError for a pageSize outside 1 to 1000 or an
 * unknown state.
 */
export function listTasksRequest(
  input: ListTasksInput,
  pageToken: string,
): MessageInitShape<typeof ListTasksRequestSchema> {
  const n = input.pageSize;
  if (n !== undefined && !(Number.isInteger(n) && n >= 1 && n <= 1000)) {
    throw new RangeError(`pageSize must be an integer from 1 to 1000, got ${n}`);
  }
  return { state: taskStateToProto(input.state), pageSize: n ?? 0, pageToken };
}
