// gRPC statuses become precise errors.
import assert from "node:assert/strict";
import * as net from "node:net";
import { performance } from "node:perf_hooks";
import { after, before, describe, it } from "node:test";
import { ConnectError } from "@connectrpc/connect";
import { brokerErrorFrom } from "../src/errors.js";
import { RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import {
  AuthenticationError,
  BrokerClient,
  BrokerError,
  CanceledError,
  Code,
  DeadlineExceededError,
  InvalidArgumentError,
  PermissionDeniedError,
  RateLimitedError,
  UnavailableError,
  UnknownPolicyError,
} from "../src/index.js";
import { type BrokerProcess, freePort, startBroker } from "./helpers.js";

describe("errors", () => {
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

  it("INVALID_ARGUMENT carries field violations", async () => {
    const err = await client.classify({ status: 42 }).then(
      () => assert.fail("expected an error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InvalidArgumentError);
    assert.ok(err instanceof BrokerError);
    assert.equal(err.code, Code.InvalidArgument);
    assert.equal(err.codeName, "INVALID_ARGUMENT");
    assert.equal(err.name, "InvalidArgumentError");
    assert.deepEqual(
      err.fieldViolations.map((v) => v.field),
      ["status_code"],
    );
    assert.match(err.fieldViolations[0]?.description ?? "", /between 100 and 599/);
  });

  it("reports every problem", async () => {
    await assert.rejects(
      client.classify({
        status: 503,
        headers: [
          ["ok", "1"],
          ["bad name", "x"],
        ],
        provider: "no-such-provider",
        method: "G E T",
      }),
      (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError);
        assert.deepEqual(
          new Set(e.fieldViolations.map((v) => v.field)),
          new Set(["headers[1].name", "provider", "method"]),
        );
        return true;
      },
    );
  });

  it("Execute with a bad URL is INVALID_ARGUMENT", async () => {
    await assert.rejects(client.execute({ url: "ftp://example.invalid/file" }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.ok(
        e.fieldViolations.some((v) => v.field.includes("url")),
        JSON.stringify(e.fieldViolations),
      );
      return true;
    });
  });

  it("an unknown policy is FAILED_PRECONDITION", async () => {
    await assert.rejects(client.classify({ status: 503, policy: "no-such-policy" }), (e: unknown) => {
      assert.ok(e instanceof UnknownPolicyError);
      assert.equal(e.code, Code.FailedPrecondition);
      assert.match(e.message, /no-such-policy/);
      return true;
    });
  });

  it("timeoutMs is a gRPC deadline", async () => {
    // A TCP listener that accepts and never speaks HTTP/2.
    const silent = net.createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    const c = new BrokerClient(`127.0.0.1:${port}`);
    const t0 = performance.now();
    await assert.rejects(c.classify({ status: 200, timeoutMs: 500 }), DeadlineExceededError);
    const elapsed = performance.now() - t0;
    c.close();
    silent.close();
    assert.ok(elapsed >= 400 && elapsed < 5000, String(elapsed));
  });

  it("an unreachable broker is UNAVAILABLE", async () => {
    const c = new BrokerClient(`127.0.0.1:${await freePort()}`, { timeoutMs: 5000 });
    await assert.rejects(c.classify({ status: 200 }), UnavailableError);
    c.close();
  });

  it("checks arguments it cannot encode", async () => {
    await assert.rejects(client.classify({ transportError: "gremlins" as never }), RangeError);
    await assert.rejects(client.classify({ status: 503, now: new Date("not a date") }), RangeError);
  });
});

describe("error mapping", () => {
  it("RESOURCE_EXHAUSTED carries the RetryInfo delay", () => {
    const cause = new ConnectError("pacing", Code.ResourceExhausted, undefined, [
      { desc: RetryInfoSchema, value: { retryDelay: { seconds: 2n, nanos: 500_000_000 } } },
    ]);
    const err = brokerErrorFrom(cause);
    assert.ok(err instanceof RateLimitedError);
    assert.equal(err.retryDelayMs, 2500);
    assert.equal(err.message, "pacing");
    assert.equal(err.cause, cause);
  });

  const cases: [Code, new (...args: never[]) => BrokerError][] = [
    [Code.Unauthenticated, AuthenticationError],
    [Code.PermissionDenied, PermissionDeniedError],
    [Code.InvalidArgument, InvalidArgumentError],
    [Code.FailedPrecondition, UnknownPolicyError],
    [Code.ResourceExhausted, RateLimitedError],
    [Code.DeadlineExceeded, DeadlineExceededError],
    [Code.Unavailable, UnavailableError],
    [Code.Canceled, CanceledError],
    [Code.Internal, BrokerError],
  ];
  for (const [code, cls] of cases) {
    it(`${Code[code]} -> ${cls.name}`, () => {
      const err = brokerErrorFrom(new ConnectError("m", code));
      assert.equal(err.constructor, cls);
      assert.equal(err.code, code);
    });
  }
});
