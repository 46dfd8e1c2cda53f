// Test helpers: a real broker process and a scripted local HTTP upstream.
//
// The broker binary is $BROKER_BIN, or <repo>/bin/broker, built with
// `go build -o <repo>/bin/broker ./cmd/broker` when missing. Every broker
// listens on a free 127.0.0.1 port and is killed when the test file ends.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const VECTORS = path.join(REPO, "testdata", "classify.jsonl");
export const TWO_TENANTS = path.join(REPO, "testdata", "config", "two-tenants.yaml");

export function brokerBin(): string {
  const env = process.env.BROKER_BIN;
  if (env) {
    // A relative path may be relative to here or to the repository root.
    if (!path.isAbsolute(env) && !existsSync(env) && existsSync(path.join(REPO, env))) return path.join(REPO, env);
    return env;
  }
  const bin = path.join(REPO, "bin", "broker");
  if (!existsSync(bin)) {
    execFileSync("go", ["build", "-o", bin, "./cmd/broker"], { cwd: REPO, stdio: "inherit" });
  }
  return bin;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** healthStatus calls grpc.health.v1.Health/Check (service "") over raw HTTP/2; 1 is SERVING. */
function healthStatus(target: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://${target}`);
    const done = (v: number | undefined): void => {
      session.destroy();
      resolve(v);
    };
    session.on("error", () => done(undefined));
    const req = session.request({
      ":method": "POST",
      ":path": "/grpc.health.v1.Health/Check",
      "content-type": "application/grpc",
      te: "trailers",
    });
    const chunks: Buffer[] = [];
    req.setTimeout(1000, () => done(undefined));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => done(undefined));
    req.on("end", () => {
      // One length-prefixed message: HealthCheckResponse{status = 1} is 08 01.
      const buf = Buffer.concat(chunks);
      done(buf.length >= 7 && buf[5] === 0x08 ? buf[6] : undefined);
    });
    req.end(Buffer.from([0, 0, 0, 0, 0])); // HealthCheckRequest{} is empty
  });
}

export interface BrokerProcess {
  target: string;
  log(): string;
  stop(): Promise<void>;
}

const SETPRIV = "/usr/bin/setpriv";

/**
 * dieWithTests runs the broker under setpriv --pdeathsig KILL where Linux has
 * it, so that the kernel kills the broker when the test process dies without
 * its cleanups (a crash, a kill). setpriv execs the broker in place: the pid
 * stop() kills is still the broker's.
 */
function dieWithTests(file: string, args: string[]): [string, string[]] {
  if (process.platform === "linux" && existsSync(SETPRIV)) {
    return [SETPRIV, ["--pdeathsig", "KILL", "--", file, ...args]];
  }
  return [file, args];
}

/** startBroker starts bin/broker on a free port and waits for health SERVING. */
export async function startBroker(args: string[] = []): Promise<BrokerProcess> {
  const port = await freePort();
  const target = `127.0.0.1:${port}`;
  const [file, argv] = dieWithTests(brokerBin(), ["--listen", target, ...args]);
  const child: ChildProcess = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const proc: BrokerProcess = {
    target,
    log: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
  const deadline = performance.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`broker exited with ${child.exitCode} before serving:\n${output}`);
    }
    if ((await healthStatus(target)) === 1) return proc;
    if (performance.now() > deadline) {
      await proc.stop();
      throw new Error(`broker not SERVING after 20s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Reply {
  status: number;
  headers?: [string, string][];
  body?: string;
}

export interface RecordedRequest {
  method: string;
  url: string;
  headers: [string, string][];
  body: Buffer;
  /** performance.now() at arrival. */
  at: number;
}

/** Upstream answers a script of replies (the last repeats) and records each request. */
export class Upstream {
  replies: Reply[] = [{ status: 200 }];
  requests: RecordedRequest[] = [];
  private server: http.Server;

  private constructor(server: http.Server) {
    this.server = server;
  }

  static async start(): Promise<Upstream> {
    const up = new Upstream(http.createServer());
    up.server.on("request", (req, res) => {
      const at = performance.now();
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const headers: [string, string][] = [];
        for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
          headers.push([req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string]);
        }
        up.requests.push({ method: req.method ?? "", url: req.url ?? "", headers, body: Buffer.concat(chunks), at });
        const reply = up.replies[Math.min(up.requests.length - 1, up.replies.length - 1)] ?? { status: 500 };
        const body = Buffer.from(reply.body ?? "");
        const flat: string[] = [];
        for (const [n, v] of reply.headers ?? []) flat.push(n, v);
        flat.push("Content-Length", String(body.length));
        res.writeHead(reply.status, flat);
        res.end(body);
      });
    });
    await new Promise<void>((resolve) => up.server.listen(0, "127.0.0.1", () => resolve()));
    return up;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  script(...replies: Reply[]): void {
    this.replies = replies;
    this.requests = [];
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** FakeTime is a clock (Unix ms) that moves only when the code under test sleeps. */
export class FakeTime {
  sleeps: number[] = [];
  constructor(public nowMs = 0) {}
  now = (): number => this.nowMs;
  sleep = async (ms: number): Promise<void> => {
    this.sleeps.push(ms);
    this.nowMs += ms;
  };
}
