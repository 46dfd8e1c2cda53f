// Installing the package from a fresh clone, as a user would, into a
// throwaway consumer project, then importing it and calling a real broker.
//
// The "clone" is the repository's files as git would check them out (tracked
// files plus new ones not ignored, copied from the work tree), so it has the
// committed dist/ and no node_modules. Two ways in:
//   1. `npm install ./clients/typescript` at the clone's root: npm links the
//      folder and installs its dependencies into the root (the folder sits
//      inside the project).
//   2. `npm install --install-links <clone>/clients/typescript` from a project
//      elsewhere: npm packs the folder (files: dist, README) and installs it
//      like a registry package, with its three runtime dependencies. (Without
//      --install-links npm would only symlink a folder outside the project
//      and install none of its dependencies.)
// Neither runs a build: dist/ is committed (see README.md, "Installing").
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { REASONS } from "../src/index.js";
import { type BrokerProcess, REPO, startBroker } from "./helpers.js";

const run = promisify(execFile);

/** cleanEnv is this process's environment without the npm_* variables `npm test` sets, which would steer a nested npm. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^npm_/i.test(k) && k !== "INIT_CWD") env[k] = v;
  }
  return { ...env, ...extra };
}

async function npm(cwd: string, ...args: string[]): Promise<void> {
  try {
    await run("npm", [...args, "--no-audit", "--no-fund", "--no-update-notifier", "--prefer-offline"], {
      cwd,
      env: cleanEnv(),
      maxBuffer: 16 << 20,
      timeout: 240_000,
    });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`npm ${args.join(" ")} failed in ${cwd}:\n${stdout ?? ""}\n${stderr ?? ""}`, { cause: e });
  }
}

/** consumer writes an ES-module project that imports the client and classifies one response. */
function consumer(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, "package.json"),
    `${JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }, null, 2)}\n`,
  );
  writeFileSync(
    path.join(dir, "main.js"),
    [
      'import { BrokerClient, REASONS } from "@retrybroker/client";',
      "const client = new BrokerClient(process.env.BROKER_TARGET, { timeoutMs: 10000 });",
      'const d = await client.classify({ status: 429, headers: [["Retry-After", "3"]] });',
      "client.close();",
      "console.log(JSON.stringify({ action: d.action, delayMs: d.delayMs, reason: d.reason, known: REASONS.length }));",
      "",
    ].join("\n"),
  );
}

async function runConsumer(dir: string, target: string): Promise<unknown> {
  const { stdout } = await run(process.execPath, ["main.js"], {
    cwd: dir,
    env: cleanEnv({ BROKER_TARGET: target }),
    timeout: 30_000,
  });
  return JSON.parse(stdout);
}

// `known` comes from the installed dist/, REASONS from src/: equal only while dist/ is in step.
const expected = { action: "retry", delayMs: 3000, reason: "REASON_SERVER_HINT", known: REASONS.length };

describe("npm install from a fresh clone", { timeout: 600_000 }, () => {
  let tmp: string;
  let clone: string;
  let broker: BrokerProcess;
  before(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), "retrybroker-install-"));
    clone = path.join(tmp, "clone");
    const files = execFileSync(
      "git",
      ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "clients/typescript"],
      { cwd: REPO },
    )
      .toString()
      .split("\0")
      .filter((f) => f !== "" && existsSync(path.join(REPO, f)));
    assert.ok(files.includes("clients/typescript/dist/index.js"), "dist/index.js is committed");
    for (const f of files) {
      mkdirSync(path.dirname(path.join(clone, f)), { recursive: true });
      copyFileSync(path.join(REPO, f), path.join(clone, f));
    }
    assert.equal(existsSync(path.join(clone, "clients/typescript/node_modules")), false);
    broker = await startBroker();
  });
  after(async () => {
    await broker?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("npm install ./clients/typescript at the clone's root", async () => {
    consumer(clone);
    await npm(clone, "install", "./clients/typescript");
    const installed = path.join(clone, "node_modules/@retrybroker/client");
    assert.ok(lstatSync(installed).isSymbolicLink(), "npm links a folder inside the project");
    assert.ok(existsSync(path.join(installed, "dist/index.d.ts")), "types are there");
    assert.deepEqual(await runConsumer(clone, broker.target), expected);
  });

  it("npm install --install-links <clone>/clients/typescript from a project elsewhere", async () => {
    const elsewhere = path.join(tmp, "elsewhere");
    consumer(elsewhere);
    await npm(elsewhere, "install", "--install-links", path.join(clone, "clients/typescript"));
    const installed = path.join(elsewhere, "node_modules/@retrybroker/client");
    assert.ok(!lstatSync(installed).isSymbolicLink(), "installed as a copy, not a link");
    assert.ok(existsSync(path.join(installed, "dist/index.d.ts")), "types are there");
    assert.equal(existsSync(path.join(installed, "src")), false, "only the files of package.json are packed");
    assert.deepEqual(await runConsumer(elsewhere, broker.target), expected);
  });
});
