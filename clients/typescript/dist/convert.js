import { Action as PbAction, BodyEnd as PbBodyEnd, Outcome as PbOutcome, Reason as PbReason, TaskState as PbTaskState, TransportError as PbTransportError, } from "./gen/retrybroker/v1/broker_pb.js";
import { ExecuteResult, headerPairs, TRANSPORT_ERROR_KINDS, } from "./types.js";
/** headersToProto returns the headers as HttpHeader init objects, in order, duplicates kept. */
export function headersToProto(h) {
    return headerPairs(h).map(([name, value]) => ({ name, value }));
}
/** bodyBytes returns a body as bytes: empty for undefined or null, UTF-8 for a string. */
export function bodyBytes(body) {
    if (body === undefined || body === null)
        return new Uint8Array(0);
    if (typeof body === "string")
        return new TextEncoder().encode(body);
    if (body instanceof Uint8Array)
        return body;
    return new Uint8Array(body);
}
/** splitMs returns milliseconds as whole seconds and nanoseconds in [0, 1e9). */
function splitMs(ms) {
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
export function durationFromMs(ms, what) {
    if (!Number.isFinite(ms) || ms < 0) {
        throw new RangeError(`${what} must be a finite, non-negative number of milliseconds`);
    }
    return splitMs(ms);
}
/**
 * timestampOf returns a Date or Unix milliseconds as a Timestamp init.
 * Throws a RangeError for an invalid Date or a non-finite number.
 */
export function timestampOf(t, what) {
    const ms = t instanceof Date ? t.getTime() : t;
    if (!Number.isFinite(ms))
        throw new RangeError(`${what} must be a valid Date or Unix milliseconds`);
    return splitMs(ms);
}
/** msOf returns a Duration as milliseconds, or undefined when it is unset. */
export function msOf(d) {
    return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}
function dateOf(t) {
    return t === undefined ? undefined : new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6));
}
/**
 * transportErrorToProto returns the enum value of a kind ("timeout" or
 * "TRANSPORT_ERROR_TIMEOUT"). Throws a RangeError for a kind this client does
 * not know.
 */
export function transportErrorToProto(kind) {
    let k = kind.trim().toLowerCase();
    if (k.startsWith("transport_error_"))
        k = k.slice("transport_error_".length);
    if (!TRANSPORT_ERROR_KINDS.includes(k)) {
        throw new RangeError(`unknown transport error ${JSON.stringify(kind)} (one of ${TRANSPORT_ERROR_KINDS.join(", ")})`);
    }
    const v = PbTransportError[k.toUpperCase()];
    if (v === undefined)
        throw new RangeError(`unknown transport error ${JSON.stringify(kind)}`);
    return v;
}
/** transportErrorOf returns the kind of an enum value; undefined for UNSPECIFIED, "transport_error_<n>" when unknown. */
function transportErrorOf(v) {
    if (v === PbTransportError.UNSPECIFIED)
        return undefined;
    const name = PbTransportError[v];
    return (name ? name.toLowerCase() : `transport_error_${v}`);
}
/** enumName returns the proto name of a value, or prefix + number when this client does not know it. */
function enumName(e, v, prefix) {
    const name = e[v];
    return name === undefined ? `${prefix}${v}` : `${prefix}${name}`;
}
/** decisionOf returns a Decision message as a Decision; `delayMs` is set only when retrying. */
export function decisionOf(d) {
    const action = d?.action === PbAction.RETRY ? "retry" : d?.action === PbAction.DO_NOT_RETRY ? "do_not_retry" : "unspecified";
    const out = {
        action,
        hintSource: d?.hintSource ?? "",
        reason: enumName(PbReason, d?.reason ?? 0, "REASON_"),
        provider: d?.provider ?? "",
        rule: d?.rule ?? "",
    };
    if (action === "retry")
        out.delayMs = msOf(d?.delay) ?? 0;
    const hint = msOf(d?.hint);
    if (hint !== undefined)
        out.hintMs = hint;
    return out;
}
/**
 * attemptOf returns an Attempt message as an Attempt. `status` is undefined
 * when there was no response; an attempt whose body broke off keeps its
 * status next to transportError "body_incomplete".
 */
export function attemptOf(a) {
    const te = transportErrorOf(a.transportError);
    const out = {
        number: a.number,
        durationMs: msOf(a.duration) ?? 0,
        errorMessage: a.errorMessage,
        waitedMs: msOf(a.waited) ?? 0,
        probe: a.probe,
    };
    const start = dateOf(a.startTime);
    if (start)
        out.startTime = start;
    if (a.statusCode !== 0)
        out.status = a.statusCode;
    if (te !== undefined)
        out.transportError = te;
    if (a.decision)
        out.decision = decisionOf(a.decision);
    return out;
}
/** outcomeOf returns an Outcome value's proto name ("OUTCOME_<n>" when unknown). */
export function outcomeOf(v) {
    return enumName(PbOutcome, v, "OUTCOME_");
}
/** executeResultOf returns an ExecuteResponse message as an ExecuteResult. */
export function executeResultOf(r) {
    const resp = r.response;
    return new ExecuteResult({
        status: resp?.statusCode,
        headers: (resp?.headers ?? []).map((h) => [h.name, h.value]),
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
export function streamHeadOf(h) {
    return {
        status: h.statusCode,
        headers: h.headers.map((x) => [x.name, x.value]),
        attempts: h.attempts.map(attemptOf),
        provider: h.provider,
    };
}
/** streamResultOf returns a StreamEnd message as a StreamResult. */
export function streamResultOf(e) {
    const out = {
        attempts: e.attempts.map(attemptOf),
        outcome: outcomeOf(e.outcome),
        bodyComplete: e.bodyComplete,
        bodyEnd: enumName(PbBodyEnd, e.bodyEnd, "BODY_END_"),
        errorMessage: e.errorMessage,
        trailers: e.trailers.map((x) => [x.name, x.value]),
        bodyBytes: Number(e.bodyBytes),
        provider: e.provider,
    };
    const ra = msOf(e.retryAfter);
    if (ra !== undefined)
        out.retryAfterMs = ra;
    return out;
}
/** overridesInit returns the overrides as an ExecuteOverrides init; undefined fields stay unset. */
export function overridesInit(o) {
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
export function executeRequest(input, defaultPolicy) {
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
export function classifyRequest(input, defaultPolicy) {
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
export function taskStateToProto(state) {
    if (state === undefined)
        return PbTaskState.UNSPECIFIED;
    let k = state.trim().toUpperCase();
    if (k.startsWith("TASK_STATE_"))
        k = k.slice("TASK_STATE_".length);
    const v = PbTaskState[k];
    if (v === undefined) {
        throw new RangeError(`unknown task state ${JSON.stringify(state)}`);
    }
    return v;
}
/** taskOf returns a Task message as a Task; unset times stay undefined. */
export function taskOf(t) {
    const out = {
        taskId: t.taskId,
        policy: t.policy,
        state: enumName(PbTaskState, t.state, "TASK_STATE_"),
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
        if (v !== undefined)
            out[k] = v;
    }
    if (t.response) {
        const r = t.response;
        const resp = {
            status: r.statusCode,
            headers: r.headers.map((h) => [h.name, h.value]),
            body: r.body,
            bodyTruncated: r.bodyTruncated,
            bodyIncomplete: r.bodyIncomplete,
        };
        out.response = resp;
    }
    return out;
}
/** taskPageOf returns a ListTasksResponse message as a TaskPage. */
export function taskPageOf(r) {
    return { tasks: r.tasks.map(taskOf), nextPageToken: r.nextPageToken };
}
/** createTaskRequest returns the request of a CreateTask call as a plain object. */
export function createTaskRequest(input, defaultPolicy) {
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
export function listTasksRequest(input, pageToken) {
    const n = input.pageSize;
    if (n !== undefined && !(Number.isInteger(n) && n >= 1 && n <= 1000)) {
        throw new RangeError(`pageSize must be an integer from 1 to 1000, got ${n}`);
    }
    return { state: taskStateToProto(input.state), pageSize: n ?? 0, pageToken };
}
//# sourceMappingURL=convert.js.map