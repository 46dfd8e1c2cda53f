// Proto messages become the client's own types, new contract fields included;
// requests are plain objects that Connect serializes as it would messages.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  attemptOf,
  classifyRequest,
  decisionOf,
  executeRequest,
  executeResultOf,
  listTasksRequest,
  taskOf,
  taskStateToProto,
  transportErrorToProto,
} from "../src/convert.js";
import {
  AttemptSchema,
  ClassifyResponseRequestSchema,
  DecisionSchema,
  ExecuteRequestSchema,
  ExecuteResponseSchema,
  Outcome as PbOutcome,
  Reason as PbReason,
  TaskState as PbTaskState,
  TransportError as PbTransportError,
  TaskSchema,
} from "../src/gen/retrybroker/v1/broker_pb.js";
import { BrokerClient, isFinalTaskState, OUTCOMES, REASONS, TASK_STATES, TRANSPORT_ERROR_KINDS } from "../src/index.js";
import { type BrokerProcess, startBroker } from "./helpers.js";

/** enumNames returns the names of a TypeScript enum object (its string keys). */
function enumNames(e: object): string[] {
  return Object.keys(e).filter((k) => Number.isNaN(Number(k)));
}

describe("conversions", () => {
  it("reads a task, leaving unset times undefined", () => {
    const t = taskOf(
      create(TaskSchema, {
        taskId: "t1",
        policy: "bulk",
        state: PbTaskState.WAITING,
        outcome: PbOutcome.GATE_CLOSED,
        waitReason: "gate_closed",
        idempotencyKey: "k",
        attempts: [{ number: 1, statusCode: 429 }],
        response: { statusCode: 429, headers: [{ name: "Retry-After", value: "60" }], body: new Uint8Array([120]) },
        notBefore: { seconds: 1_700_000_000n, nanos: 0 },
        nextRunTime: { seconds: 1_700_000_060n, nanos: 500_000_000 },
      }),
    );
    assert.equal(t.taskId, "t1");
    assert.equal(t.policy, "bulk");
    assert.equal(t.state, "TASK_STATE_WAITING");
    assert.equal(isFinalTaskState(t.state), false);
    assert.equal(t.outcome, "OUTCOME_GATE_CLOSED");
    assert.equal(t.waitReason, "gate_closed");
    assert.equal(t.idempotencyKey, "k");
    assert.deepEqual(
      t.attempts.map((a) => a.status),
      [429],
    );
    assert.deepEqual(t.response?.headers, [["Retry-After", "60"]]);
    assert.equal(t.notBefore?.getTime(), 1_700_000_000_000);
    assert.equal(t.nextRunTime?.getTime(), 1_700_000_060_500);
    assert.equal(t.giveUpAfter, undefined);
    assert.equal(t.createTime, undefined);
    assert.equal(taskOf(create(TaskSchema, { state: 99 as PbTaskState })).state, "TASK_STATE_99");
    assert.equal(taskOf(create(TaskSchema, {})).response, undefined);
    assert.equal(isFinalTaskState("TASK_STATE_CANCELLED"), true);
  });

  it("names task states either way", () => {
    assert.equal(taskStateToProto(undefined), PbTaskState.UNSPECIFIED);
    assert.equal(taskStateToProto("waiting"), PbTaskState.WAITING);
    assert.equal(taskStateToProto("TASK_STATE_FAILED"), PbTaskState.FAILED);
    assert.throws(() => taskStateToProto("asleep"), RangeError);
    assert.throws(() => listTasksRequest({ pageSize: 0 }, ""), RangeError);
    assert.throws(() => listTasksRequest({ pageSize: 1001 }, ""), RangeError);
  });

  it("knows every proto reason, outcome and transport error", () => {
    // A value the client lacks would still convert (as its name), but the
    // lists and types callers name must follow the proto.
    assert.deepEqual(new Set(REASONS), new Set(enumNames(PbReason).map((n) => `REASON_${n}`)));
    assert.deepEqual(new Set(OUTCOMES), new Set(enumNames(PbOutcome).map((n) => `OUTCOME_${n}`)));
    assert.deepEqual(new Set(TASK_STATES), new Set(enumNames(PbTaskState).map((n) => `TASK_STATE_${n}`)));
    assert.deepEqual(
      new Set(TRANSPORT_ERROR_KINDS),
      new Set(
        enumNames(PbTransportError)
          .filter((n) => n !== "UNSPECIFIED")
          .map((n) => n.toLowerCase()),
      ),
    );
  });

  it("reads the decision's rule and the new reasons", () => {
    const d = decisionOf(
      create(DecisionSchema, {
        action: 1,
        reason: PbReason.SERVER_HINT,
        delay: { seconds: 1n, nanos: 500_000_000 },
        hint: { seconds: 1n, nanos: 500_000_000 },
        hintSource: "body:retry_after",
        provider: "openai",
        rule: "openai/rate_limit",
      }),
    );
    assert.deepEqual(d, {
      action: "retry",
      delayMs: 1500,
      hintMs: 1500,
      hintSource: "body:retry_after",
      reason: "REASON_SERVER_HINT",
      provider: "openai",
      rule: "openai/rate_limit",
    });
    for (const [pb, name] of [
      [PbReason.BREAKER_OPEN, "REASON_BREAKER_OPEN"],
      [PbReason.SHUTTING_DOWN, "REASON_SHUTTING_DOWN"],
      [PbReason.CREDENTIALS_UNAVAILABLE, "REASON_CREDENTIALS_UNAVAILABLE"],
    ] as const) {
      const got = decisionOf(create(DecisionSchema, { action: 2, reason: pb }));
      assert.equal(got.reason, name);
      assert.equal(got.action, "do_not_retry");
      assert.equal(got.delayMs, undefined);
      assert.equal(got.rule, "");
    }
    assert.equal(decisionOf(create(DecisionSchema, { action: 2, reason: 99 as PbReason })).reason, "REASON_99");
  });

  it("keeps the status of an attempt whose body broke off, and its probe flag", () => {
    const a = attemptOf(
      create(AttemptSchema, {
        number: 2,
        statusCode: 200,
        transportError: PbTransportError.BODY_INCOMPLETE,
        errorMessage: "unexpected EOF",
        probe: true,
        duration: { nanos: 250_000_000 },
        waited: { seconds: 1n },
        startTime: { seconds: 1_800_000_000n },
      }),
    );
    assert.equal(a.status, 200);
    assert.equal(a.transportError, "body_incomplete");
    assert.equal(a.probe, true);
    assert.equal(a.durationMs, 250);
    assert.equal(a.waitedMs, 1000);
    assert.equal(a.startTime?.getTime(), 1_800_000_000_000);

    const refused = attemptOf(create(AttemptSchema, { number: 1, transportError: PbTransportError.TIMEOUT }));
    assert.equal(refused.status, undefined);
    assert.equal(refused.transportError, "timeout");
    assert.equal(refused.probe, false);
    assert.equal(refused.startTime, undefined);
  });

  it("reads body_incomplete and the new outcomes", () => {
    const r = executeResultOf(
      create(ExecuteResponseSchema, {
        response: {
          statusCode: 200,
          headers: [
            { name: "A", value: "1" },
            { name: "a", value: "2" },
          ],
          body: new TextEncoder().encode("partial"),
          bodyIncomplete: true,
        },
        outcome: PbOutcome.ATTEMPTS_EXHAUSTED,
      }),
    );
    assert.equal(r.status, 200);
    assert.equal(r.text(), "partial");
    assert.equal(r.bodyIncomplete, true);
    assert.equal(r.bodyTruncated, false);
    assert.deepEqual(r.headerValues("a"), ["1", "2"]);
    for (const [pb, name] of [
      [PbOutcome.BREAKER_OPEN, "OUTCOME_BREAKER_OPEN"],
      [PbOutcome.SHUTTING_DOWN, "OUTCOME_SHUTTING_DOWN"],
      [PbOutcome.CREDENTIALS_UNAVAILABLE, "OUTCOME_CREDENTIALS_UNAVAILABLE"],
    ] as const) {
      const res = executeResultOf(create(ExecuteResponseSchema, { outcome: pb, retryAfter: { seconds: 30n } }));
      assert.equal(res.outcome, name);
      assert.equal(res.retryAfterMs, 30_000);
      assert.equal(res.status, undefined);
      assert.equal(res.bodyIncomplete, false);
    }
  });

  it("builds requests as plain objects that encode like messages", () => {
    const init = executeRequest(
      {
        method: "POST",
        url: "http://127.0.0.1:1/x",
        headers: [["Idempotency-Key", "k"]],
        body: "hi",
        overrides: { maxRetries: 0, maxDelayMs: 1500, maxResponseBody: 10 },
      },
      "standard",
    );
    assert.equal(Object.getPrototypeOf(init), Object.prototype, "a plain object, not a message");
    const msg = create(ExecuteRequestSchema, init);
    assert.equal(msg.policy, "standard");
    assert.equal(msg.request?.method, "POST");
    assert.deepEqual(msg.request?.body, new TextEncoder().encode("hi"));
    assert.equal(msg.overrides?.maxRetries, 0);
    assert.equal(msg.overrides?.maxDelay?.seconds, 1n);
    assert.equal(msg.overrides?.maxDelay?.nanos, 500_000_000);
    assert.equal(msg.overrides?.maxResponseBody, 10n);
    assert.equal(msg.overrides?.totalTimeout, undefined);
    assert.ok(toBinary(ExecuteRequestSchema, msg).length > 0);

    const c = create(
      ClassifyResponseRequestSchema,
      classifyRequest({ transportError: "body_incomplete", deadline: 1_800_000_000_250 }, ""),
    );
    assert.equal(c.transportError, PbTransportError.BODY_INCOMPLETE);
    assert.equal(c.statusCode, 0);
    assert.equal(c.deadline?.seconds, 1_800_000_000n);
    assert.equal(c.deadline?.nanos, 250_000_000);
    assert.equal(c.now, undefined);
    assert.equal(c.method, "GET");
    assert.equal(c.attempt, 1);
    assert.equal(transportErrorToProto("TRANSPORT_ERROR_BODY_INCOMPLETE"), PbTransportError.BODY_INCOMPLETE);
    assert.throws(() => executeRequest({ url: "x", overrides: { maxDelayMs: -1 } }, ""), RangeError);
  });
});

describe("the new transport error kind against a real broker", () => {
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

  it("classifies body_incomplete as retryable, with backoff", async () => {
    const d = await client.classify({ transportError: "body_incomplete" });
    assert.equal(d.action, "retry");
    assert.equal(d.reason, "REASON_BACKOFF");
    assert.ok(d.delayMs !== undefined && d.delayMs >= 0);
    assert.equal(d.rule, "");
  });
});
