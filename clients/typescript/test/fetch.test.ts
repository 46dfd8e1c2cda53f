// createBrokerFetch: a fetch that goes through ExecuteStream.
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { BrokerClient, BrokerFetchError, createBrokerFetch, streamResultOf } from "../src/index.js";
import { type BrokerProcess, freePort, startBroker, Upstream } from "./helpers.js";

describe("createBrokerFetch", () => {
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

  it("returns a standard Response after the broker's retries", async () => {
    upstream.script(
      { status: 503, headers: [["Retry-After", "0"]] },
      {
        status: 200,
        headers: [
          ["Content-Type", "application/json"],
          ["X-Dup", "a"],
          ["X-Dup", "b"],
        ],
        body: '{"ok":true}',
      },
    );
    const brokerFetch = createBrokerFetch(client);
    const res = await brokerFetch(`${upstream.url}/items?page=2`, { headers: { Accept: "application/json" } });
    assert.ok(res instanceof Response);
    assert.equal(res.status, 200);
    assert.equal(res.ok, true);
    assert.equal(res.url, `${upstream.url}/items?page=2`);
    assert.equal(res.headers.get("content-type"), "application/json");
    assert.equal(res.headers.get("x-dup"), "a, b");
    assert.deepEqual(await res.json(), { ok: true });
    const result = streamResultOf(res);
    assert.equal(result?.attempts.length, 2);
    assert.equal(result?.outcome, "OUTCOME_SUCCESS");
    assert.equal(upstream.requests.length, 2);
    assert.ok(upstream.requests[0]?.headers.some(([n, v]) => n.toLowerCase() === "accept" && v === "application/json"));
  });

  it("sends method and body, and accepts a Request", async () => {
    upstream.script({ status: 201, body: "created" });
    const brokerFetch = createBrokerFetch(client);
    const req = new Request(`${upstream.url}/orders`, {
      method: "PUT",
      body: JSON.stringify({ qty: 1 }),
      headers: { "Content-Type": "application/json" },
    });
    const res = await brokerFetch(req);
    assert.equal(res.status, 201);
    assert.equal(await res.text(), "created");
    assert.equal(upstream.requests[0]?.method, "PUT");
    assert.equal(upstream.requests[0]?.body.toString(), '{"qty":1}');
  });

  it("returns final error statuses as responses, like fetch", async () => {
    upstream.script({ status: 404, body: "nope" });
    const res = await createBrokerFetch(client)(`${upstream.url}/missing`);
    assert.equal(res.status, 404);
    assert.equal(res.ok, false);
    assert.equal(await res.text(), "nope");
  });

  it("handles null-body statuses and HEAD", async () => {
    upstream.script({ status: 204 });
    const brokerFetch = createBrokerFetch(client);
    assert.equal((await brokerFetch(`${upstream.url}/x`, { method: "DELETE" })).status, 204);
    upstream.script({ status: 200, body: "ignored" });
    const head = await brokerFetch(`${upstream.url}/x`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  });

  it("rejects with a TypeError when no response came back", async () => {
    const url = `http://127.0.0.1:${await freePort()}/`;
    const brokerFetch = createBrokerFetch(client, { overrides: { maxRetries: 0 } });
    await assert.rejects(brokerFetch(url), (e: unknown) => {
      assert.ok(e instanceof BrokerFetchError);
      assert.ok(e instanceof TypeError);
      assert.equal(e.result.attempts[0]?.transportError, "connection_refused");
      return true;
    });
  });

  it("honours an aborted signal", async () => {
    const ac = new AbortController();
    ac.abort(new Error("caller gave up"));
    await assert.rejects(createBrokerFetch(client)(`${upstream.url}/`, { signal: ac.signal }), /caller gave up/);
    assert.equal(upstream.requests.length, 0);
  });

  it("passes the deadline: a long hint returns the 503 at once", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "5"]] });
    const res = await createBrokerFetch(client, { timeoutMs: 1500 })(`${upstream.url}/`);
    assert.equal(res.status, 503);
    assert.equal(streamResultOf(res), undefined, "the end is known once the body was read");
    await res.text();
    assert.equal(streamResultOf(res)?.outcome, "OUTCOME_DEADLINE_TOO_SHORT");
    assert.equal(streamResultOf(res)?.retryAfterMs, 5000);
  });
});
