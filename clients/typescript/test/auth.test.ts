// API keys: a broker started with the two-tenant config.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, describe, it } from "node:test";
import { AuthenticationError, BrokerClient, Code, UnknownPolicyError } from "../src/index.js";
import { type BrokerProcess, startBroker, TWO_TENANTS } from "./helpers.js";

describe("authentication with --config", () => {
  // Started by the first test that needs it, so that a broker which cannot
  // start fails each test with its log (rather than cancelling them).
  let started: Promise<BrokerProcess> | undefined;
  const brokerP = (): Promise<BrokerProcess> => {
    started ??= (async () => {
      assert.ok(existsSync(TWO_TENANTS), `${TWO_TENANTS} is missing`);
      return startBroker(["--config", TWO_TENANTS]);
    })();
    return started;
  };
  after(async () => {
    await started?.then(
      (b) => b.stop(),
      () => undefined,
    );
  });

  it("refuses a call without a key", async () => {
    const broker = await brokerP();
    const c = new BrokerClient(broker.target, { timeoutMs: 5000 });
    await assert.rejects(c.classify({ status: 503 }), (e: unknown) => {
      assert.ok(e instanceof AuthenticationError);
      assert.equal(e.code, Code.Unauthenticated);
      assert.equal(e.codeName, "UNAUTHENTICATED");
      return true;
    });
    c.close();
  });

  it("refuses a wrong key", async () => {
    const broker = await brokerP();
    const c = new BrokerClient(broker.target, { apiKey: "not-a-real-key", timeoutMs: 5000 });
    await assert.rejects(c.classify({ status: 503 }), AuthenticationError);
    c.close();
  });

  it("accepts team-a's key", async () => {
    const broker = await brokerP();
    const c = new BrokerClient(broker.target, { apiKey: "team-a-secret-key", timeoutMs: 5000 });
    const d = await c.classify({ status: 429, headers: [["Retry-After", "3"]] });
    c.close();
    assert.equal(d.action, "retry");
    assert.equal(d.delayMs, 3000);
    assert.equal(d.hintSource, "retry-after");
  });

  it("keeps policies per tenant", async () => {
    const broker = await brokerP();
    const a = new BrokerClient(broker.target, { apiKey: "team-a-secret-key", timeoutMs: 5000 });
    const d = await a.classify({ status: 503, method: "POST", policy: "reports" });
    a.close();
    assert.equal(d.action, "retry"); // reports retries unsafe methods
    const b = new BrokerClient(broker.target, { apiKey: "team-b-secret-key", timeoutMs: 5000 });
    await assert.rejects(b.classify({ status: 503, policy: "reports" }), UnknownPolicyError);
    b.close();
  });
});
