import { create } from "@bufbuild/protobuf";
import { DurationSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { Action as PbAction, ExecuteOverridesSchema, Outcome as PbOutcome, Reason as PbReason, TransportError as PbTransportError, } from "./gen/retrybroker/v1/broker_pb.js";
import { ExecuteResult, TRANSPORT_ERROR_KINDS, headerPairs, } from "./types.js";
export function headersToProto(h) {
    return headerPairs(h).map(([name, value]) => ({ name, value }));
}
export function bodyBytes(body) {
    if (body === undefined || body === null)
        return new Uint8Array(0);
    if (typeof body === "string")
        return new TextEncoder().encode(body);
    if (body instanceof Uint8Array)
        return body;
    return new Uint8Array(body);
}
function checkMs(ms, what) {
    if (!Number.isFinite(ms) || ms < 0)
        throw new RangeError(`${what} must be a finite, non-negative number of milliseconds`);
}
export function durationFromMs(ms, what) {
    checkMs(ms, what);
    let seconds = Math.floor(ms / 1000);
    let nanos = Math.round((ms - seconds * 1000) * 1e6);
    if (nanos >= 1e9) {
        seconds += 1;
        nanos -= 1e9;
    }
    return create(DurationSchema, { seconds: BigInt(seconds), nanos });
}
export function timestampOf(t, what) {
    const ms = t instanceof Date ? t.getTime() : t;
    if (!Number.isFinite(ms))
        throw new RangeError(`${what} must be a valid Date or Unix milliseconds`);
    let seconds = Math.floor(ms / 1000);
    let nanos = Math.round((ms - seconds * 1000) * 1e6);
    if (nanos >= 1e9) {
        seconds += 1;
        nanos -= 1e9;
    }
    return create(TimestampSchema, { seconds: BigInt(seconds), nanos });
}
export function msOf(d) {
    return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}
function dateOf(t) {
    return t === undefined ? undefined : new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6));
}
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
function transportErrorOf(v) {
    if (v === PbTransportError.UNSPECIFIED)
        return undefined;
    const name = PbTransportError[v];
    return (name ? name.toLowerCase() : `transport_error_${v}`);
}
function enumName(e, v, prefix) {
    const name = e[v];
    return name === undefined ? `${prefix}${v}` : `${prefix}${name}`;
}
export function decisionOf(d) {
    const action = d?.action === PbAction.RETRY ? "retry" : d?.action === PbAction.DO_NOT_RETRY ? "do_not_retry" : "unspecified";
    const out = {
        action,
        hintSource: d?.hintSource ?? "",
        reason: enumName(PbReason, d?.reason ?? 0, "REASON_"),
        provider: d?.provider ?? "",
    };
    if (action === "retry")
        out.delayMs = msOf(d?.delay) ?? 0;
    const hint = msOf(d?.hint);
    if (hint !== undefined)
        out.hintMs = hint;
    return out;
}
function attemptOf(a) {
    const te = transportErrorOf(a.transportError);
    const out = {
        number: a.number,
        durationMs: msOf(a.duration) ?? 0,
        errorMessage: a.errorMessage,
        waitedMs: msOf(a.waited) ?? 0,
    };
    const start = dateOf(a.startTime);
    if (start)
        out.startTime = start;
    if (te === undefined && a.statusCode !== 0)
        out.status = a.statusCode;
    if (te !== undefined)
        out.transportError = te;
    if (a.decision)
        out.decision = decisionOf(a.decision);
    return out;
}
export function executeResultOf(r) {
    const resp = r.response;
    return new ExecuteResult(resp?.statusCode, (resp?.headers ?? []).map((h) => [h.name, h.value]), resp?.body ?? new Uint8Array(0), resp?.bodyTruncated ?? false, r.attempts.map(attemptOf), enumName(PbOutcome, r.outcome, "OUTCOME_"), msOf(r.retryAfter), r.provider);
}
export function overridesToProto(o) {
    const m = create(ExecuteOverridesSchema, {});
    if (o.maxRetries !== undefined)
        m.maxRetries = o.maxRetries;
    if (o.maxDelayMs !== undefined)
        m.maxDelay = durationFromMs(o.maxDelayMs, "maxDelayMs");
    if (o.totalTimeoutMs !== undefined)
        m.totalTimeout = durationFromMs(o.totalTimeoutMs, "totalTimeoutMs");
    if (o.attemptTimeoutMs !== undefined)
        m.attemptTimeout = durationFromMs(o.attemptTimeoutMs, "attemptTimeoutMs");
    if (o.maxResponseBody !== undefined)
        m.maxResponseBody = BigInt(o.maxResponseBody);
    return m;
}
//# sourceMappingURL=convert.js.map