// Tasks through a real broker with --tasks-sqlite to a local HTTP upstream.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import {
  BrokerClient,
  BrokerError,
  Code,
  FailedPreconditionError,
  InvalidArgumentError,
  isFinalTaskState,
  NotFoundError,
  type Task,
  UnknownPolicyError,
} from "../src/index.js";
import { type BrokerProcess, startBroker, Upstream } from "./helpers.js";

// Generous: a task is dispatched up to about 5 s after it is due (River's
// scheduler), and the machine may be loaded.
const WATCH_TIMEOUT_MS = 90_000;
const HOUR_MS = 3_600_000;

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => assert.fail("expected an error"),
    (e: unknown) => e,
  );
}

describe("tasks", () => {
  let dir: string;
  let broker: BrokerProcess;
  let client: BrokerClient;
  let upstream: Upstream;
  // One broker for the file: a fresh SQLite file in a temporary directory.
  // The list test counts scheduled tasks, so every other test leaves its
  // tasks final.
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "rb-tasks-"));
    broker = await startBroker(["--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", path.join(dir, "tasks.db")]);
    client = new BrokerClient(broker.target, { timeoutMs: 10_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    upstream = await Upstream.start();
  });
  afterEach(async () => {
    await upstream.close();
  });

  async function watchAll(taskId: string): Promise<Task[]> {
    const seen = await collect(client.watchTask(taskId, { timeoutMs: WATCH_TIMEOUT_MS }));
    assert.ok(seen.length > 0, "watchTask yielded nothing");
    assert.deepEqual(new Set(seen.map((t) => t.taskId)), new Set([taskId]));
    assert.ok(
      seen.slice(0, -1).every((t) => !isFinalTaskState(t.state)),
      JSON.stringify(seen.map((t) => t.state)),
    );
    return seen;
  }

  it("runs a POST task through a 503 to SUCCEEDED with one idempotency key", async () => {
    upstream.script({ status: 503, headers: [["Retry-After", "0"]], body: "busy" }, { status: 201, body: "created" });
    const created = await client.createTask({
      method: "POST",
      url: `${upstream.url}/orders`,
      headers: [["Content-Type", "application/json"]],
      body: '{"qty":1}',
      taskId: "post-1",
    });
    assert.equal(created.taskId, "post-1");
    assert.equal(created.state, "TASK_STATE_SCHEDULED");
    assert.equal(created.outcome, "OUTCOME_UNSPECIFIED");
    assert.ok(created.idempotencyKey.length > 0);
    assert.ok(created.createTime instanceof Date);
    assert.ok(created.nextRunTime instanceof Date);
    assert.equal(created.response, undefined);

    const seen = await watchAll("post-1");
    const final = seen.at(-1);
    assert.ok(final);
    assert.equal(final.state, "TASK_STATE_SUCCEEDED");
    assert.equal(final.outcome, "OUTCOME_SUCCESS");
    assert.equal(final.nextRunTime, undefined);
    assert.equal(final.idempotencyKey, created.idempotencyKey);
    assert.deepEqual(
      final.attempts.map((a) => a.status),
      [503, 201],
    );
    assert.equal(final.attempts[0]?.decision?.action, "retry");
    assert.equal(final.response?.status, 201);
    assert.equal(new TextDecoder().decode(final.response?.body), "created");

    assert.equal(upstream.requests.length, 2);
    for (const r of upstream.requests) {
      assert.equal(r.method, "POST");
      assert.equal(r.url, "/orders");
      assert.equal(r.body.toString(), '{"qty":1}');
      assert.deepEqual(
        r.headers.filter(([n]) => n.toLowerCase() === "idempotency-key").map(([, v]) => v),
        [created.idempotencyKey],
      );
    }
    const got = await client.getTask("post-1");
    assert.equal(got.state, "TASK_STATE_SUCCEEDED");
    assert.equal(got.attempts.length, 2);
  });

  it("deduplicates creation by taskId", async () => {
    const notBefore = new Date(Date.now() + HOUR_MS);
    const first = await client.createTask({ url: "http://127.0.0.1:1/a", taskId: "dedup", notBefore });
    const again = await client.createTask({
      method: "POST",
      url: "http://127.0.0.1:1/b",
      headers: { "Idempotency-Key": "another-key" },
      taskId: "dedup",
    });
    assert.equal(first.notBefore?.getTime(), notBefore.getTime());
    assert.equal(again.idempotencyKey, first.idempotencyKey);
    assert.notEqual(again.idempotencyKey, "another-key");
    assert.equal(again.createTime?.getTime(), first.createTime?.getTime());
    assert.equal(again.notBefore?.getTime(), first.notBefore?.getTime());
    assert.equal(again.state, "TASK_STATE_SCHEDULED");
    assert.equal((await client.cancelTask("dedup")).state, "TASK_STATE_CANCELLED");
  });

  it("cancels a task whose notBefore is in the future", async () => {
    const notBefore = Date.now() + HOUR_MS; // Unix ms work too
    const created = await client.createTask({
      url: `${upstream.url}/later`,
      taskId: "later",
      notBefore,
      giveUpAfter: new Date(notBefore + HOUR_MS),
    });
    assert.equal(created.state, "TASK_STATE_SCHEDULED");
    assert.equal(created.nextRunTime?.getTime(), notBefore);
    assert.equal(created.giveUpAfter?.getTime(), notBefore + HOUR_MS);

    const cancelled = await client.cancelTask("later");
    assert.equal(cancelled.state, "TASK_STATE_CANCELLED");
    assert.equal(cancelled.nextRunTime, undefined);
    assert.deepEqual(cancelled.attempts, []);
    const again = await client.cancelTask("later"); // a final task comes back unchanged
    assert.equal(again.state, "TASK_STATE_CANCELLED");
    assert.equal(again.updateTime?.getTime(), cancelled.updateTime?.getTime());
    assert.deepEqual(
      (await collect(client.watchTask("later"))).map((t) => t.state),
      ["TASK_STATE_CANCELLED"],
    );
    const err = await rejection(client.retryTask("later"));
    assert.ok(err instanceof FailedPreconditionError, String(err));
    assert.ok(!(err instanceof UnknownPolicyError));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.equal(upstream.requests.length, 0);
  });

  it("lists tasks by state, page by page", async () => {
    const notBefore = new Date(Date.now() + HOUR_MS);
    const ids = [0, 1, 2, 3, 4].map((i) => `list-${i}`);
    for (const taskId of ids) await client.createTask({ url: "http://127.0.0.1:1/", taskId, notBefore });

    const listed = await collect(client.listTasks({ state: "TASK_STATE_SCHEDULED", pageSize: 2 }));
    assert.deepEqual(
      listed.map((t) => t.taskId),
      ids,
    );
    assert.ok(listed.every((t) => t.state === "TASK_STATE_SCHEDULED"));
    assert.deepEqual(
      (await collect(client.listTasks({ state: "cancelled" }))).map((t) => t.taskId),
      ["dedup", "later"],
    );
    assert.equal((await collect(client.listTasks())).length, 8); // post-1, dedup, later, list-0..4

    const sizes: number[] = [];
    let pageToken = "";
    for (;;) {
      const page = await client.listTasksPage({ state: "TASK_STATE_SCHEDULED", pageSize: 2, pageToken });
      sizes.push(page.tasks.length);
      if (page.nextPageToken === "") break;
      pageToken = page.nextPageToken;
    }
    assert.deepEqual(sizes, [2, 2, 1]);

    let n = 0;
    for await (const t of client.listTasks({ state: "TASK_STATE_SCHEDULED", pageSize: 2 })) {
      assert.equal(t.taskId, ids[n]);
      if (++n === 3) break;
    }
    assert.equal(n, 3);

    // A watch of a task due in an hour can be left after its first task.
    for await (const t of client.watchTask("list-0", { timeoutMs: WATCH_TIMEOUT_MS })) {
      assert.equal(t.state, "TASK_STATE_SCHEDULED");
      break;
    }

    const bad = await rejection(client.listTasksPage({ pageToken: "not-a-token" }));
    assert.ok(bad instanceof InvalidArgumentError, String(bad));
    await assert.rejects(client.listTasksPage({ state: "asleep" }), RangeError);
    for (const taskId of ids) await client.cancelTask(taskId);
  });

  it("retries a FAILED task", async () => {
    upstream.script({ status: 400, body: "bad" }, { status: 200, body: "fine" });
    const created = await client.createTask({ url: `${upstream.url}/flaky`, taskId: "retry-me" });
    const failed = (await watchAll("retry-me")).at(-1);
    assert.equal(failed?.state, "TASK_STATE_FAILED");
    assert.equal(failed?.outcome, "OUTCOME_NOT_RETRYABLE");
    assert.equal(failed?.response?.status, 400);
    assert.equal(failed?.attempts.length, 1);

    const retried = await client.retryTask("retry-me");
    assert.equal(retried.state, "TASK_STATE_SCHEDULED");
    assert.equal(retried.idempotencyKey, created.idempotencyKey);
    const done = (await watchAll("retry-me")).at(-1);
    assert.equal(done?.state, "TASK_STATE_SUCCEEDED");
    assert.equal(new TextDecoder().decode(done?.response?.body), "fine");
    assert.equal(done?.attempts.length, 2);
    assert.equal(upstream.requests.length, 2);
    assert.ok((await rejection(client.retryTask("retry-me"))) instanceof FailedPreconditionError);
  });

  it("maps an unknown task to NotFoundError", async () => {
    for (const op of [
      () => client.getTask("nope"),
      () => client.cancelTask("nope"),
      () => client.retryTask("nope"),
      () => collect(client.watchTask("nope")),
    ]) {
      const err = await rejection(op());
      assert.ok(err instanceof NotFoundError, String(err));
      assert.ok(err instanceof BrokerError);
      assert.equal(err.code, Code.NotFound);
      assert.equal(err.codeName, "NOT_FOUND");
      assert.equal(err.name, "NotFoundError");
    }
  });

  it("refuses a sensitive header", async () => {
    const err = await rejection(
      client.createTask({ url: "http://127.0.0.1:1/", headers: { Authorization: "Bearer s3cret" } }),
    );
    assert.ok(err instanceof InvalidArgumentError, String(err));
    assert.equal(err.fieldViolations.length, 1);
    assert.match(err.fieldViolations[0]?.description ?? "", /broker-held credential/);
    assert.doesNotMatch(err.message, /s3cret/);
  });
});

describe("tasks without storage", () => {
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

  it("answers UNIMPLEMENTED", async () => {
    const err = await rejection(client.getTask("x"));
    assert.ok(err instanceof BrokerError);
    assert.equal(err.code, Code.Unimplemented);
    assert.match(err.message, /--tasks-sqlite/);
  });
});
