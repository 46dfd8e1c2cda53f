/** defaultSleep waits ms milliseconds, or rejects when signal aborts. */
export function defaultSleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted) {
            reject(signal.reason);
            return;
        }
        const onAbort = () => {
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
export function httpResultOf(value) {
    if (Array.isArray(value) && typeof value[0] === "number") {
        return { status: value[0], headers: (value[1] ?? []) };
    }
    if (typeof value === "object" && value !== null) {
        const v = value;
        const status = typeof v.status === "number" ? v.status : typeof v.statusCode === "number" ? v.statusCode : undefined;
        if (status !== undefined) {
            if (Array.isArray(v.rawHeaders)) {
                const raw = v.rawHeaders;
                const pairs = [];
                for (let i = 0; i + 1 < raw.length; i += 2)
                    pairs.push([raw[i], raw[i + 1]]);
                return { status, headers: pairs };
            }
            return { status, headers: (v.headers ?? []) };
        }
    }
    throw new TypeError("cannot read an HTTP status from the result; return a Response, {status, headers} or pass inspect");
}
const CODE_KINDS = {
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
export function transportErrorOf(error) {
    const todo = [error];
    const seen = new Set();
    let fetchFailed = false;
    while (todo.length > 0 && seen.size < 16) {
        const e = todo.shift();
        if (typeof e !== "object" || e === null || seen.has(e))
            continue;
        seen.add(e);
        const { name, code, message, cause } = e;
        if (name === "AbortError")
            return undefined;
        if (name === "TimeoutError")
            return "timeout";
        if (typeof code === "string" && code in CODE_KINDS)
            return CODE_KINDS[code];
        if (e instanceof TypeError && message === "fetch failed")
            fetchFailed = true;
        if (cause !== undefined)
            todo.push(cause);
        if (e instanceof AggregateError)
            todo.push(...e.errors);
    }
    return fetchFailed ? "other" : undefined;
}
/**
 * runRetry is the loop behind BrokerClient.retry: call fn, classify what
 * happened, then return, rethrow, or sleep and go again.
 */
export async function runRetry(broker, fn, o) {
    const inspect = o.inspect ?? ((r) => httpResultOf(r));
    const kindOf = o.transportErrorOf ?? transportErrorOf;
    const sleep = o.sleep ?? defaultSleep;
    const monotonic = o.now ?? (() => performance.now());
    const wall = o.now ?? Date.now;
    if (o.deadlineMs !== undefined && !(o.deadlineMs >= 0)) {
        throw new RangeError("deadlineMs must be a non-negative number of milliseconds");
    }
    const deadlineAt = o.deadlineMs !== undefined ? monotonic() + o.deadlineMs : undefined;
    for (let attempt = 1;; attempt++) {
        o.signal?.throwIfAborted();
        let result;
        let error;
        let failed = false;
        let info;
        let kind;
        try {
            result = await fn(attempt);
            info = await inspect(result);
        }
        catch (e) {
            kind = kindOf(e);
            if (kind === undefined)
                throw e;
            error = e;
            failed = true;
        }
        const input = {
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
            if (failed)
                throw error;
            return result;
        }
        const event = { attempt, decision };
        if (failed)
            event.error = error;
        else
            event.result = result;
        if (o.onRetry)
            await o.onRetry(event);
        else if (result instanceof Response && !result.bodyUsed)
            await result.body?.cancel().catch(() => { });
        await sleep(decision.delayMs ?? 0, o.signal);
    }
}
//# sourceMappingURL=retry.js.map