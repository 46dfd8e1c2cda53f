// The classify-driven retry loop, with a fake sleep and clock: no real waits.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, before, describe, it } from "node:test";
import { BrokerClient, type ClassifyInput, type Decision, type RetryEvent, transportErrorOf } from "../src/index.js";
import { runRetry } from "../src/retry.js";
import { type BrokerProcess, FakeTime, freePort, startBroker, Upstream } from "./helpers.js";

type Result = [number, [string, string][]];

/** scripted returns fn() that yields results in turn (throwing Errors), counting calls. */
function scripted(...results: (Result | Error)[]): { fn: () => Promise<Result>; calls: number } {
  const s = {
    calls: 0,
    fn: async (): Promise<Result> => {
      const r = results[Math.min(s.calls, results.length - 1)];
      s.calls++;
      if (r instanceof Error) throw r;
      return r as Result;
    },
  };
  return s;
}

function sysError(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe("retry()", () => {
  let broker: BrokerProcess;
  let client: BrokerClient;
  before(async () => {
    broker = await startBroker(["--allow-destinations", "127.0.0.1/32"]);
    client = new BrokerClient(broker.target, { timeoutMs: 10_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
  });

  it("sleeps exactly the hints", async () => {
    const ft = new FakeTime();
    const s = scripted([503, [["Retry-After", "2"]]], [429, [["Retry-After", "1"]]], [200, []]);
    const t0 = performance.now();
    assert.deepEqual(await client.retry(s.fn, { sleep: ft.sleep }), [200, []]);
    assert.deepEqual(ft.sleeps, [2000, 1000]);
    assert.equal(s.calls, 3);
    assert.ok(performance.now() - t0 < 1000, "no real waiting");
  });

  it("stops when attempts are exhausted", async () => {
    const ft = new FakeTime();
    const events: RetryEvent<Result>[] = [];
    const s = scripted([503, [["Retry-After", "0"]]]);
    const r = await client.retry(s.fn, { sleep: ft.sleep, onRetry: (e) => void events.push(e) });
    assert.equal(r[0], 503);
    assert.equal(s.calls, 4); // max_retries 3: up to 4 sends
    assert.deepEqual(ft.sleeps, [0, 0, 0]);
    assert.deepEqual(
      events.map((e) => e.attempt),
      [1, 2, 3],
    );
    assert.ok(events.every((e) => e.decision.reason === "REASON_SERVER_HINT"));
  });

  it("maps transport errors and backs off", async () => {
    const ft = new FakeTime();
    const s = scripted(sysError("ECONNRESET"), sysError("ECONNREFUSED"), [200, []]);
    assert.deepEqual(await client.retry(s.fn, { sleep: ft.sleep }), [200, []]);
    assert.equal(ft.sleeps.length, 2);
    const [first = -1, second = -1] = ft.sleeps;
    assert.ok(first >= 0 && first <= 1000, `first wait ${first} ms`); // full jitter after attempt 1
    assert.ok(second >= 0 && second <= 2000, `second wait ${second} ms`); // ... and after attempt 2
  });

  it("rethrows the last transport error", async () => {
    const ft = new FakeTime();
    const s = scripted(sysError("ETIMEDOUT"));
    await assert.rejects(client.retry(s.fn, { sleep: ft.sleep }), /ETIMEDOUT/);
    assert.equal(s.calls, 4);
  });

  it("does not retry a permanent transport error", async () => {
    const ft = new FakeTime();
    const s = scripted(sysError("ENOTFOUND"));
    await assert.rejects(client.retry(s.fn, { sleep: ft.sleep }), /ENOTFOUND/);
    assert.equal(s.calls, 1);
    assert.deepEqual(ft.sleeps, []);
  });

  it("rethrows other errors at once", async () => {
    const ft = new FakeTime();
    const s = scripted(new RangeError("bug"));
    await assert.rejects(client.retry(s.fn, { sleep: ft.sleep }), RangeError);
    assert.equal(s.calls, 1);
  });

  it("retries unsafe methods only with an idempotency key", async () => {
    const ft = new FakeTime();
    let s = scripted([503, []], [200, []]);
    assert.deepEqual(await client.retry(s.fn, { method: "POST", sleep: ft.sleep }), [503, []]);
    assert.equal(s.calls, 1);
    s = scripted([503, [["Retry-After", "1"]]], [200, []]);
    const r = await client.retry(s.fn, {
      method: "POST",
      requestHeaders: { "Idempotency-Key": "abc" },
      sleep: ft.sleep,
    });
    assert.deepEqual(r, [200, []]);
    assert.deepEqual(ft.sleeps, [1000]);
  });

  it("reads dates against the fake clock and honours the deadline", async () => {
    const start = Date.parse("2026-12-01T12:00:00Z");
    let ft = new FakeTime(start);
    let s = scripted([503, [["Retry-After", "Tue, 01 Dec 2026 12:00:30 GMT"]]], [200, []]);
    assert.deepEqual(await client.retry(s.fn, { sleep: ft.sleep, now: ft.now }), [200, []]);
    assert.deepEqual(ft.sleeps, [30_000]);

    // 8 s for the whole loop: a second 5 s wait would run past it.
    ft = new FakeTime(start);
    s = scripted([503, [["Retry-After", "5"]]]);
    const r = await client.retry(s.fn, { sleep: ft.sleep, now: ft.now, deadlineMs: 8000 });
    assert.equal(r[0], 503);
    assert.deepEqual(ft.sleeps, [5000]);
    assert.equal(s.calls, 2);
  });

  it("works with fetch against a real upstream", async () => {
    const up = await Upstream.start();
    up.script({ status: 503, headers: [["Retry-After", "0"]] }, { status: 200, body: "ok" });
    const ft = new FakeTime();
    const res = await client.retry(() => fetch(`${up.url}/a`), { url: `${up.url}/a`, sleep: ft.sleep });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "ok");
    assert.deepEqual(ft.sleeps, [0]);
    assert.equal(up.requests.length, 2);
    await up.close();
  });

  it("maps fetch's connection refused", async () => {
    const url = `http://127.0.0.1:${await freePort()}/`;
    const ft = new FakeTime();
    await assert.rejects(
      client.retry(() => fetch(url), { sleep: ft.sleep }),
      TypeError,
    );
    assert.equal(ft.sleeps.length, 3); // 4 attempts, all refused
  });

  it("stops when the signal aborts", async () => {
    const ac = new AbortController();
    const s = scripted([503, [["Retry-After", "0"]]]);
    const sleep = async (): Promise<void> => ac.abort(new Error("stop"));
    await assert.rejects(client.retry(s.fn, { sleep, signal: ac.signal }), /stop/);
    assert.equal(s.calls, 1);
  });
});

describe("transportErrorOf", () => {
  const cases: [unknown, string | undefined][] = [
    [sysError("ECONNREFUSED"), "connection_refused"],
    [sysError("ECONNRESET"), "connection_reset"],
    [sysError("EPIPE"), "connection_reset"],
    [sysError("UND_ERR_SOCKET"), "eof"],
    [sysError("UND_ERR_HEADERS_TIMEOUT"), "timeout"],
    [sysError("ETIMEDOUT"), "timeout"],
    [sysError("ENOTFOUND"), "dns_not_found"],
    [sysError("EAI_AGAIN"), "dns_temporary"],
    [sysError("CERT_HAS_EXPIRED"), "tls_certificate"],
    [sysError("ERR_TLS_CERT_ALTNAME_INVALID"), "tls_certificate"],
    [new TypeError("fetch failed", { cause: sysError("ECONNREFUSED") }), "connection_refused"],
    [new TypeError("fetch failed", { cause: new AggregateError([sysError("ECONNREFUSED")]) }), "connection_refused"],
    [new TypeError("fetch failed"), "other"],
    [new DOMException("timed out", "TimeoutError"), "timeout"],
    [new DOMException("aborted", "AbortError"), undefined],
    [new RangeError("not transport"), undefined],
    ["a string", undefined],
  ];
  for (const [err, want] of cases) {
    it(`${String((err as Error).message ?? err)} -> ${want}`, () => {
      assert.equal(transportErrorOf(err), want);
    });
  }
});

describe("the retry loop's deadline", () => {
  // A recording Classifier stands in for the broker here: the point is the
  // deadline the loop sends, which the broker only acts on.
  function recorder(): { seen: ClassifyInput[]; classify: (i: ClassifyInput) => Promise<Decision> } {
    const seen: ClassifyInput[] = [];
    return {
      seen,
      classify: async (i) => {
        seen.push(i);
        return { action: "do_not_retry", hintSource: "", reason: "REASON_SUCCESS", provider: "", rule: "" };
      },
    };
  }

  it("is kept on the monotonic clock, not the wall clock", async (t) => {
    let mono = 500;
    let wall = Date.parse("2026-12-01T12:00:00Z");
    t.mock.method(performance, "now", () => mono);
    t.mock.method(Date, "now", () => wall);
    const broker = recorder();
    await runRetry(
      broker,
      async () => {
        mono += 4000; // the attempt takes 4 s ...
        wall -= 3_600_000; // ... while NTP steps the wall clock back an hour
        return [200, []] as Result;
      },
      { deadlineMs: 60_000 },
    );
    const sent = broker.seen[0]?.deadline;
    assert.equal(sent, wall + 56_000, "sent as wall now + what is left on the monotonic clock");
    assert.equal(broker.seen[0]?.now, undefined, "without a fake clock the broker's clock reads hints");
  });

  it("refuses a negative deadline", async () => {
    await assert.rejects(
      runRetry(recorder(), async () => [200, []] as Result, { deadlineMs: -1 }),
      RangeError,
    );
    await assert.rejects(
      runRetry(recorder(), async () => [200, []] as Result, { deadlineMs: Number.NaN }),
      RangeError,
    );
  });
});
