// Every conformance vector of testdata/classify.jsonl through classify().
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { BrokerClient, type TransportErrorKind } from "../src/index.js";
import { type BrokerProcess, startBroker, VECTORS } from "./helpers.js";

interface Vector {
  name: string;
  method?: string;
  status?: number;
  transport_error?: TransportErrorKind;
  headers?: [string, string][];
  body?: string;
  provider?: string;
  attempt?: number;
  now?: string;
  expect: {
    action: "retry" | "do_not_retry";
    delay_ms?: number;
    delay_max_ms?: number;
    hint_source?: string;
    reason?: string;
    hint_ms?: number;
  };
}

const vectors: Vector[] = readFileSync(VECTORS, "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l) as Vector);

describe("conformance vectors via ClassifyResponse", () => {
  let broker: BrokerProcess;
  let client: BrokerClient;
  before(async () => {
    broker = await startBroker();
    client = new BrokerClient(broker.target, { timeoutMs: 10_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
  });

  it("has unique vectors", () => {
    assert.ok(vectors.length >= 60);
    assert.equal(new Set(vectors.map((v) => v.name)).size, vectors.length);
  });

  for (const v of vectors) {
    it(v.name, async () => {
      const input: Parameters<BrokerClient["classify"]>[0] = {
        method: v.method ?? "GET",
        attempt: v.attempt ?? 1,
        headers: v.headers ?? [],
      };
      if (v.status !== undefined) input.status = v.status;
      if (v.transport_error !== undefined) input.transportError = v.transport_error;
      if (v.provider !== undefined) input.provider = v.provider;
      if (v.now !== undefined) input.now = new Date(v.now);
      if (v.body !== undefined) input.body = v.body;
      const d = await client.classify(input);
      const e = v.expect;
      const show = JSON.stringify(d);
      assert.equal(d.action, e.action, show);
      if (e.reason !== undefined) assert.equal(d.reason, e.reason, show);
      if (e.hint_source !== undefined) assert.equal(d.hintSource, e.hint_source, show);
      if (e.delay_ms !== undefined) {
        assert.ok(d.delayMs !== undefined, show);
        const tolerance = e.delay_ms % 1000 !== 0 ? 1 : 0; // fractional-seconds hints: +-1 ms
        assert.ok(Math.abs(d.delayMs - e.delay_ms) <= tolerance + 1e-6, show);
      }
      if (e.delay_max_ms !== undefined) {
        assert.ok(d.delayMs !== undefined && d.delayMs >= 0 && d.delayMs <= e.delay_max_ms, show);
      }
      if (e.hint_ms !== undefined) {
        assert.ok(d.hintMs !== undefined && Math.abs(d.hintMs - e.hint_ms) <= 1, show);
      }
      if (d.action === "do_not_retry") assert.equal(d.delayMs, undefined, show);
    });
  }
});
