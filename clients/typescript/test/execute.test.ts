// Execute through a real broker to a local HTTP upstream.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { BrokerClient, PermissionDeniedError } from "../src/index.js";
import { type BrokerProcess, startBroker, Upstream } from "./helpers.js";

describe("Execute", () => {
  let broker: BrokerProcess;
  let client: BrokerClient;
  let upstream: Upstream;
  before(async () => {
    broker = await startBroker(["--allow-destinations", "127.0.0.1/32"]);
    client = new BrokerClient(broker.target, { timeoutMs: 20_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
  });
  beforeEach(async () => {
    upstream = await Upstream.start();
  });
  afterEach(async () => {
    await upstream.close();
  });

  it("waits for Retry-After, then returns the final 200", async () => {
    upstream.script(
      { status: 503, headers: [["Retry-After", "1"]], body: "busy" },
      {
        status: 200,
        headers: [
          ["Content-Type", "text/plain"],
          ["X-Dup", "a"],
          ["X-Dup", "b"],
        ],
        body: "hello",
      },
    );
    const r = await client.execute({ method: "GET", url: `${upstream.url}/thing?x=1`, headers: [["X-Test", "yes"]] });

    assert.equal(r.status, 200);
    assert.equal(r.text(), "hello");
    assert.equal(r.bodyTruncated, false);
    assert.equal(r.outcome, "OUTCOME_SUCCESS");
    assert.equal(r.retryAfterMs, undefined);
    assert.equal(r.header("content-type"), "text/plain");
    assert.deepEqual(r.headerValues("x-dup"), ["a", "b"]);

    assert.deepEqual(
      r.attempts.map((a) => a.number),
      [1, 2],
    );
    const [first, second] = r.attempts;
    assert.ok(first && second);
    assert.equal(first.status, 503);
    assert.equal(first.decision?.action, "retry");
    assert.equal(first.decision?.reason, "REASON_SERVER_HINT");
    assert.equal(first.decision?.hintSource, "retry-after");
    assert.equal(first.decision?.delayMs, 1000);
    assert.equal(second.status, 200);

    assert.equal(upstream.requests.length, 2);
    const [a, b] = upstream.requests;
    assert.ok(a && b);
    assert.ok(b.at - a.at >= 1000, `second attempt ${b.at - a.at} ms after the first`);
    for (const req of upstream.requests) {
      assert.equal(req.method, "GET");
      assert.equal(req.url, "/thing?x=1");
      assert.ok(req.headers.some(([n, v]) => n.toLowerCase() === "x-test" && v === "yes"));
    }
  });

  it("returns at once when the hint outlasts the deadline", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "5"]], body: "later" });
    const t0 = performance.now();
    const r = await client.execute({ url: `${upstream.url}/slow`, timeoutMs: 1500 });
    const elapsed = performance.now() - t0;

    assert.ok(elapsed < 1500, `took ${elapsed} ms; the broker should return at once`);
    assert.equal(r.outcome, "OUTCOME_DEADLINE_TOO_SHORT");
    assert.ok(r.retryAfterMs !== undefined && Math.abs(r.retryAfterMs - 5000) <= 10, String(r.retryAfterMs));
    assert.equal(r.status, 503);
    assert.equal(r.text(), "later");
    assert.equal(r.attempts.length, 1);
    assert.equal(upstream.requests.length, 1);
  });

  it("sends method, body and idempotency key unchanged on every attempt", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "0"]] }, { status: 201, body: "created" });
    const r = await client.execute({
      method: "POST",
      url: `${upstream.url}/orders`,
      headers: { "Idempotency-Key": "k-123", "Content-Type": "application/json" },
      body: '{"qty": 1}',
    });
    assert.equal(r.status, 201);
    assert.equal(r.attempts.length, 2);
    assert.equal(upstream.requests.length, 2);
    for (const req of upstream.requests) {
      assert.equal(req.method, "POST");
      assert.equal(req.body.toString(), '{"qty": 1}');
      assert.deepEqual(
        req.headers.filter(([n]) => n.toLowerCase() === "idempotency-key").map(([, v]) => v),
        ["k-123"],
      );
    }
  });

  it("does not retry POST without an idempotency key", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "0"]] });
    const r = await client.execute({ method: "POST", url: `${upstream.url}/x`, body: "data" });
    assert.equal(r.status, 503);
    assert.equal(r.outcome, "OUTCOME_NOT_RETRYABLE");
    assert.equal(r.attempts[0]?.decision?.reason, "REASON_UNSAFE_METHOD");
    assert.equal(upstream.requests.length, 1);
  });

  it("applies per-call overrides", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "0"]] });
    const r = await client.execute({ url: `${upstream.url}/x`, overrides: { maxRetries: 1 } });
    assert.equal(r.outcome, "OUTCOME_ATTEMPTS_EXHAUSTED");
    assert.equal(r.attempts.length, 2);
    assert.equal(upstream.requests.length, 2);
  });

  it("reports a refused destination as PermissionDeniedError", async () => {
    // Only 127.0.0.1 is allowed; 127.0.0.2 is refused on the dialled address.
    await assert.rejects(
      client.execute({ url: `http://127.0.0.2:${upstream.port}/` }),
      (e: unknown) => e instanceof PermissionDeniedError && e.codeName === "PERMISSION_DENIED",
    );
    assert.equal(upstream.requests.length, 0);
  });
});
