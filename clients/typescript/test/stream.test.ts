// ExecuteStream through a real broker: BrokerClient.executeStream and the
// streaming fetch. "Each event arrives before the next is sent" is checked
// against the upstream's own send times (performance.now), never with sleeps.
import assert from "node:assert/strict";
import * as http from "node:http";
import type * as net from "node:net";
import { performance } from "node:perf_hooks";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import {
  BrokerBodyError,
  BrokerClient,
  BrokerFetchError,
  createBrokerFetch,
  DeadlineExceededError,
  PermissionDeniedError,
  type StreamEvent,
  streamResultOf,
} from "../src/index.js";
import { type BrokerProcess, freePort, REPO, startBroker } from "./helpers.js";

// A policy that ends a body idle for 300 ms; its key is a published test key.
const STREAM_LIMITS = `${REPO}/testdata/config/stream-limits.yaml`;
const STREAM_KEY = "stream-test-key";

const EVENTS = 4;
const BLOB = Buffer.alloc(3 << 20, "0123456789abcdef");

/** StreamUpstream streams in a different way per path (see the handler). */
class StreamUpstream {
  sent: number[] = [];
  closed: Promise<void>;
  private markClosed: () => void = () => {};
  private server: http.Server;

  constructor() {
    this.closed = new Promise((resolve) => {
      this.markClosed = resolve;
    });
    this.server = http.createServer((req, res) => {
      const path = req.url ?? "/";
      if (path.startsWith("/sse")) {
        // A server-sent event every 300 ms.
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.flushHeaders();
        let i = 0;
        const send = (): void => {
          this.sent.push(performance.now());
          res.write(`data: {"n":${i}}\n\n`);
          i++;
          if (i < EVENTS) setTimeout(send, 300);
          else res.end();
        };
        send();
      } else if (path.startsWith("/reset")) {
        // Content-Length 10000, 2000 bytes, then a TCP reset.
        res.writeHead(200, { "Content-Length": "10000" });
        res.write(Buffer.alloc(2000, "r"), () => (req.socket as net.Socket).resetAndDestroy());
      } else if (path.startsWith("/idle")) {
        // One line, then nothing until the connection closes, which it records.
        res.writeHead(200);
        res.write("first\n");
        req.socket.on("close", () => this.markClosed());
      } else if (path.startsWith("/ticks")) {
        // A line every 20 ms until the connection closes, which it records.
        res.writeHead(200);
        const t = setInterval(() => res.write("tick\n"), 20);
        res.write("tick\n");
        req.socket.on("close", () => {
          clearInterval(t);
          this.markClosed();
        });
      } else {
        res.writeHead(200, { "Content-Length": String(BLOB.length) });
        res.end(BLOB);
      }
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", () => resolve()));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** eventTimes splits server-sent events out of chunks and records when each was complete. */
class EventClock {
  private buf = "";
  events: string[] = [];
  at: number[] = [];

  feed(chunk: Uint8Array): void {
    this.buf += Buffer.from(chunk).toString();
    for (let i = this.buf.indexOf("\n\n"); i >= 0; i = this.buf.indexOf("\n\n")) {
      this.events.push(this.buf.slice(0, i));
      this.at.push(performance.now());
      this.buf = this.buf.slice(i + 2);
    }
  }

  check(up: StreamUpstream): void {
    assert.deepEqual(
      this.events,
      Array.from({ length: EVENTS }, (_, i) => `data: {"n":${i}}`),
    );
    assert.equal(up.sent.length, EVENTS);
    for (let i = 0; i + 1 < EVENTS; i++) {
      const at = this.at[i] as number;
      const next = up.sent[i + 1] as number;
      assert.ok(at < next, `event ${i} arrived ${(at - next).toFixed(1)} ms after event ${i + 1} was sent`);
    }
  }
}

async function closedWithin(up: StreamUpstream, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      up.closed,
      new Promise<void>((_, reject) => {
        timer = setTimeout(() => reject(new Error("the upstream connection was not closed")), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe("ExecuteStream", () => {
  let broker: BrokerProcess;
  let client: BrokerClient;
  let up: StreamUpstream;
  before(async () => {
    broker = await startBroker(["--allow-destinations", "127.0.0.1/32"]);
    client = new BrokerClient(broker.target, { timeoutMs: 20_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
  });
  beforeEach(async () => {
    up = new StreamUpstream();
    await up.start();
  });
  afterEach(async () => {
    await up.close();
  });

  it("executeStream yields the head, each event before the next is sent, then the end", async () => {
    const clock = new EventClock();
    const kinds: StreamEvent["type"][] = [];
    let end: StreamEvent | undefined;
    for await (const ev of client.executeStream({ url: `${up.url}/sse` })) {
      kinds.push(ev.type);
      if (ev.type === "head") {
        assert.equal(ev.head.status, 200);
        assert.equal(ev.head.attempts.length, 1);
      } else if (ev.type === "chunk") {
        clock.feed(ev.data);
      } else {
        end = ev;
      }
    }
    clock.check(up);
    assert.equal(kinds[0], "head");
    assert.equal(kinds[kinds.length - 1], "end");
    assert.ok(end?.type === "end" && end.result.bodyComplete && end.result.bodyEnd === "BODY_END_COMPLETE");
  });

  it("fetch returns a Response whose ReadableStream delivers each event before the next is sent", async () => {
    const clock = new EventClock();
    const res = await createBrokerFetch(client)(`${up.url}/sse`, { headers: { Accept: "text/event-stream" } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.ok(res.body instanceof ReadableStream);
    for await (const chunk of res.body) clock.feed(chunk);
    clock.check(up);
    const r = streamResultOf(res);
    assert.equal(r?.outcome, "OUTCOME_SUCCESS");
    assert.equal(r?.bodyComplete, true);
  });

  it("fetch streams a large body whole", async () => {
    const res = await createBrokerFetch(client)(`${up.url}/blob`);
    assert.equal(res.headers.get("content-length"), String(BLOB.length));
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(BLOB));
    assert.equal(streamResultOf(res)?.bodyBytes, BLOB.length);
  });

  it("a body the upstream resets errors with BrokerBodyError after the bytes that arrived", async () => {
    const res = await createBrokerFetch(client)(`${up.url}/reset?sig=sekrit`);
    assert.equal(res.status, 200);
    const got: Buffer[] = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of res.body as ReadableStream<Uint8Array>) got.push(Buffer.from(chunk));
      })(),
      (e: unknown) => {
        assert.ok(e instanceof BrokerBodyError);
        assert.ok(e instanceof TypeError);
        assert.equal(e.result?.bodyEnd, "BODY_END_UPSTREAM_ERROR");
        assert.equal(e.result?.bodyComplete, false);
        assert.notEqual(e.result?.outcome, "OUTCOME_SUCCESS");
        assert.ok(!e.message.includes("sekrit"));
        return true;
      },
    );
    assert.equal(Buffer.concat(got).toString(), "r".repeat(2000));

    const events: StreamEvent[] = [];
    for await (const ev of client.executeStream({ url: `${up.url}/reset` })) events.push(ev);
    const last = events[events.length - 1];
    assert.ok(last?.type === "end" && !last.result.bodyComplete && last.result.bodyEnd === "BODY_END_UPSTREAM_ERROR");
  });

  it("AbortSignal mid-body cancels the call and the upstream connection closes", async () => {
    const ac = new AbortController();
    const res = await createBrokerFetch(client)(`${up.url}/ticks`, { signal: ac.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.equal(Buffer.from(first.value as Uint8Array).toString(), "tick\n");
    ac.abort(new Error("caller gave up"));
    await assert.rejects(
      (async () => {
        for (;;) if ((await reader.read()).done) return;
      })(),
      /caller gave up/,
    );
    await closedWithin(up, 5000);
  });

  it("canceling the body cancels the call and the upstream connection closes", async () => {
    const res = await createBrokerFetch(client)(`${up.url}/ticks`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await closedWithin(up, 5000);
  });

  it("breaking out of executeStream cancels the call and the upstream connection closes", async () => {
    for await (const ev of client.executeStream({ url: `${up.url}/ticks` })) {
      if (ev.type === "chunk") break;
    }
    await closedWithin(up, 5000);
  });

  it("the deadline bounds the whole call, body included", async () => {
    const res = await createBrokerFetch(client, { timeoutMs: 400 })(`${up.url}/ticks`);
    await assert.rejects(res.text(), (e: unknown) => {
      assert.ok(e instanceof BrokerBodyError);
      assert.ok(e.cause instanceof DeadlineExceededError);
      return true;
    });
    await closedWithin(up, 5000);
  });

  it("errors before a response are Execute's", async () => {
    const url = `http://127.0.0.1:${await freePort()}/`;
    await assert.rejects(createBrokerFetch(client, { overrides: { maxRetries: 0 } })(url), (e: unknown) => {
      assert.ok(e instanceof BrokerFetchError);
      assert.equal(e.result.attempts[0]?.transportError, "connection_refused");
      return true;
    });
    const events: StreamEvent[] = [];
    for await (const ev of client.executeStream({ url, overrides: { maxRetries: 0 } })) events.push(ev);
    assert.equal(events.length, 1);
    assert.ok(events[0]?.type === "end" && events[0].result.bodyEnd === "BODY_END_NO_RESPONSE");
    const port = new URL(up.url).port;
    await assert.rejects(createBrokerFetch(client)(`http://127.0.0.2:${port}/sse`), PermissionDeniedError);
  });
});

describe("ExecuteStream limits", () => {
  let broker: BrokerProcess;
  let client: BrokerClient;
  let up: StreamUpstream;
  before(async () => {
    broker = await startBroker(["--config", STREAM_LIMITS]);
    client = new BrokerClient(broker.target, { apiKey: STREAM_KEY, timeoutMs: 20_000 });
  });
  after(async () => {
    client.close();
    await broker.stop();
  });
  beforeEach(async () => {
    up = new StreamUpstream();
    await up.start();
  });
  afterEach(async () => {
    await up.close();
  });

  it("an idle body ends with the idle timeout, through executeStream and fetch", async () => {
    const events: StreamEvent[] = [];
    for await (const ev of client.executeStream({ url: `${up.url}/idle` })) events.push(ev);
    const last = events[events.length - 1];
    assert.ok(last?.type === "end", "the stream did not end with end");
    assert.equal(last.result.bodyComplete, false);
    assert.equal(last.result.bodyEnd, "BODY_END_IDLE_TIMEOUT");
    assert.notEqual(last.result.outcome, "OUTCOME_SUCCESS");
    await closedWithin(up, 5000);

    const res = await createBrokerFetch(client)(`${up.url}/idle`);
    await assert.rejects(res.text(), BrokerBodyError);
  });
});
