// Two `oke start` processes on one PostgreSQL schema, one web and one worker: a request to web is worked by worker.
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../conformance/app-fixture.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { builtOke, withoutVitestEnv } from "../support/built-oke.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
/** POST /emit enqueues jobs.run; its worker appends the job's n to delivered.log in OPS_FIXTURE_DIR. */
const FIXTURE = fileURLToPath(new URL("../../src/cli/fixtures/ops", import.meta.url));
const SCHEMA = `roles_${process.pid}_${Date.now().toString(36)}`;

let BIN = "";
let dir = "";
const procs: ChildProcess[] = [];

/** `oke start` in prod on the test schema; resolves with its listening line and its output so far. */
async function start(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ proc: ChildProcess; lines: string[]; url: string; listening: string }> {
  const base = withoutVitestEnv(process.env);
  for (const k of Object.keys(base))
    if (k.startsWith("OKE_") || k === "DATABASE_URL" || k === "NODE_ENV" || k === "PORT") delete base[k];
  const proc = spawn(process.execPath, [BIN, "start", dir, "--port", "0", ...args], {
    cwd: REPO,
    env: {
      ...base,
      DATABASE_URL: TEST_DATABASE_URL,
      OPS_FIXTURE_SCHEMA: SCHEMA,
      OPS_FIXTURE_DIR: dir,
      OKE_CONSOLE_PORT: "off",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  procs.push(proc);
  const lines: string[] = [];
  for (const s of [proc.stdout, proc.stderr]) createInterface({ input: s }).on("line", (l) => lines.push(l));
  const listening = (): string | undefined => lines.find((l) => l.startsWith("okengine listening on "));
  await until(() => listening() !== undefined || proc.exitCode !== null, "the app to listen", 60_000);
  const line = listening();
  if (line === undefined) throw new Error(`oke start failed:\n${lines.join("\n")}`);
  return { proc, lines, url: /(http:\/\/\S+)/.exec(line)![1]!, listening: line };
}

async function stop(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
  const exited = new Promise<number | null>((r) => proc.once("close", (code) => r(code)));
  proc.kill("SIGTERM");
  return exited;
}

async function query<R extends pg.QueryResultRow>(text: string): Promise<R[]> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await c.connect();
  try {
    return (await c.query<R>(text)).rows;
  } finally {
    await c.end();
  }
}

const delivered = (): string[] => {
  const p = join(dir, "delivered.log");
  return existsSync(p) ? readFileSync(p, "utf8").split("\n").filter(Boolean) : [];
};

beforeAll(async () => {
  BIN = await builtOke();
  dir = mkdtempSync(join(tmpdir(), "oke-roles-"));
  cpSync(FIXTURE, dir, { recursive: true });
  rmSync(join(dir, "tsconfig.json"));
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
}, 120_000);

afterAll(async () => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  await query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe("oke start --role web and a worker process", { timeout: 150_000 }, () => {
  it("the web process serves the route and claims nothing; the worker process does the work and serves no route", async () => {
    const web = await start(["--role", "web"]);
    expect(web.listening).toMatch(/^okengine listening on http:\/\/127\.0\.0\.1:\d+ \(prod, role web: .*\)$/);
    const res = await fetch(`${web.url}/emit`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: 1 }),
    });
    expect(res.status).toBe(200);
    // An instance that consumed would have written it already claimed (claim at emit) and run it.
    const rows = await query<{ status: string; locked_by: string | null }>(
      `SELECT status, locked_by FROM "${SCHEMA}".messages WHERE signal = 'jobs.run'`,
    );
    expect(rows).toEqual([{ status: "pending", locked_by: null }]);

    // The role from the environment this time (OKE_ROLE), as a deployment would set it.
    const worker = await start([], { OKE_ROLE: "worker" });
    expect(worker.listening).toMatch(/\(prod, role worker: \/_\/health and \/_\/ready only\)$/);
    await until(() => delivered().length > 0, "the worker process to run the job", 60_000);
    expect(delivered()).toEqual(["1"]);
    const notServed = await fetch(`${worker.url}/emit`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: 2 }),
    });
    expect(notServed.status).toBe(404);
    expect((await fetch(`${worker.url}/_/health`)).status).toBe(200);
    expect((await fetch(`${worker.url}/_/ready`)).status).toBe(200);

    expect(await stop(web.proc)).toBe(0);
    expect(await stop(worker.proc)).toBe(0);
    // Each process's boot log says its role (JSON logs in prod).
    expect(web.lines.some((l) => l.includes('"role":"web"'))).toBe(true);
    expect(worker.lines.some((l) => l.includes('"role":"worker"'))).toBe(true);
  });
});
