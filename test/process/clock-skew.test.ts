/** Real processes on PostgreSQL, one with its host clock 40 s off or stepping 40 s after boot: leases and sleeps follow the database's clock. */
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, it, type TestContext } from "vitest";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "./spawn.ts";

const CHILD = fileURLToPath(new URL("./skew-child.ts", import.meta.url));
const admin = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });

/**
 * How many scenarios run at once. Each mostly waits (1 s holds, 10 s sleeps), but its two app
 * processes hold up to 18 PostgreSQL connections (a store pool of 4 and a LISTEN each, a pool of 4
 * for the handlers; with the default store pool of 10, all four at once took the server past its
 * 100 connections beside the other suites: "too many clients already"). One after another the file
 * took 50 to 53 s (4 × 12.5 s); two at a time 33 s, on a busier machine (load 6–9).
 */
const SCENARIOS_AT_ONCE = 2;
let scenariosRunning = 0;
const scenarioSlots: Array<() => void> = [];

afterAll(async () => {
  await admin.end();
});

interface Invocation {
  n: number;
  k: string | null;
  pid: number;
  started: number;
  finished: number | null;
}

const EMITS = 15;
const RUNS = 5;

/**
 * `skewMs`: the skewed instance's host clock is that far off from the start (measured at boot).
 * `step`: instead, it steps by that much right after boot, between the app's measurements.
 */
async function scenario(t: TestContext, skewMs: number, step = false): Promise<void> {
  while (scenariosRunning >= SCENARIOS_AT_ONCE) await new Promise<void>((r) => scenarioSlots.push(r));
  scenariosRunning++;
  const schema = `oke_skew_${step ? "s" : ""}${skewMs < 0 ? "m" : "p"}_${process.pid}`;
  // This scenario's own processes, stopped before the next scenario takes its slot, and its schema.
  const children: Child[] = [];
  const stop = async (): Promise<void> => {
    for (const c of children) if (c.proc.exitCode === null) await c.kill();
  };
  t.onTestFinished(async () => {
    await stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
  try {
    await run(t, schema, children, skewMs, step);
  } finally {
    await stop();
    scenariosRunning--;
    scenarioSlots.shift()?.();
  }
}

async function run(
  { expect }: TestContext,
  schema: string,
  children: Child[],
  skewMs: number,
  step: boolean,
): Promise<void> {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open();
  await store.close();
  await admin.query(
    `CREATE TABLE "${schema}".invocations (id bigserial PRIMARY KEY, n int NOT NULL, k text, pid int NOT NULL, started timestamptz NOT NULL, finished timestamptz)`,
  );
  await admin.query(
    `CREATE TABLE "${schema}".naps (id text PRIMARY KEY, pid int NOT NULL, slept timestamptz NOT NULL, woke timestamptz, woke_pid int)`,
  );
  // Lease 4 s, handlers hold 1 s: no lease lapses on a healthy fleet; a 40 s skew dwarfs the lease.
  const env = {
    OKE_TEST_DB: TEST_DATABASE_URL,
    OKE_SCHEMA: schema,
    OKE_LEASE_MS: "4000",
    OKE_HOLD_MS: "1000",
  };
  const skewed = new Child(
    {
      ...env,
      [step ? "OKE_CLOCK_STEP_MS" : "OKE_CLOCK_OFFSET_MS"]: String(skewMs),
      OKE_EMIT: String(EMITS),
      OKE_EMIT_BASE: "1000",
      OKE_RUNS: String(RUNS),
    },
    CHILD,
  );
  children.push(skewed);
  await skewed.waitFor((e) => e.event === "ready", "skewed ready", 60_000);
  const healthy = new Child({ ...env, OKE_EMIT: String(EMITS), OKE_RUNS: String(RUNS) }, CHILD);
  children.push(healthy);
  await healthy.waitFor((e) => e.event === "ready", "healthy ready", 60_000);

  const deadline = Date.now() + 90_000;
  for (;;) {
    const { rows } = await admin.query<{ done: string; woke: string }>(
      `SELECT (SELECT count(DISTINCT n) FROM "${schema}".invocations WHERE finished IS NOT NULL) AS done,
              (SELECT count(*) FROM "${schema}".naps WHERE woke IS NOT NULL) AS woke`,
    );
    if (Number(rows[0]!.done) === 2 * EMITS && Number(rows[0]!.woke) === 2 * RUNS) break;
    if (Date.now() > deadline) throw new Error(`not done: ${JSON.stringify(rows[0])}`);
    await new Promise((r) => setTimeout(r, 250));
  }

  const inv = (
    await admin.query<Invocation>(
      `SELECT n, k, pid, (extract(epoch FROM started) * 1000)::float8 AS started,
              (extract(epoch FROM finished) * 1000)::float8 AS finished FROM "${schema}".invocations ORDER BY started`,
    )
  ).rows;
  // Two invocations overlap when one started before the other finished (an unfinished one never ends).
  const overlaps: string[] = [];
  for (let i = 0; i < inv.length; i++)
    for (let j = i + 1; j < inv.length; j++) {
      const a = inv[i]!;
      const b = inv[j]!;
      const same = a.n === b.n || (a.k !== null && a.k === b.k);
      if (same && b.started < (a.finished ?? Infinity))
        overlaps.push(`n=${a.n}/${b.n} k=${a.k} pids ${a.pid},${b.pid}`);
    }
  const naps = (
    await admin.query<{ id: string; ms: number }>(
      `SELECT id, (extract(epoch FROM woke - slept) * 1000)::float8 AS ms FROM "${schema}".naps`,
    )
  ).rows;
  const early = naps.filter((r) => r.ms < 9_500);
  console.log(
    `clock ${step ? "step" : "skew"} ${skewMs} ms: ${inv.length} invocations of ${2 * EMITS} messages, ${overlaps.length} overlapping; ` +
      `${naps.length} naps of 10 s, shortest ${Math.round(Math.min(...naps.map((r) => r.ms)))} ms`,
  );
  expect(overlaps).toEqual([]);
  expect(early).toEqual([]);
  for (const c of [skewed, healthy]) await c.kill("SIGTERM");
}

// The scenarios run side by side (SCENARIOS_AT_ONCE), each on its own schema (and NOTIFY channel,
// named after it) with its own two processes.
describe("clock skew between PostgreSQL instances", { concurrent: true }, () => {
  it(
    "an instance 40 s fast takes over no live lease and wakes no sleep early",
    (t) => scenario(t, 40_000),
    180_000,
  );
  it(
    "an instance 40 s slow takes over no live lease and wakes no sleep early",
    (t) => scenario(t, -40_000),
    180_000,
  );
  it(
    "an instance whose host clock steps 40 s forward after boot takes over no live lease and wakes no sleep early",
    (t) => scenario(t, 40_000, true),
    180_000,
  );
  it(
    "an instance whose host clock steps 40 s back after boot takes over no live lease and wakes no sleep early",
    (t) => scenario(t, -40_000, true),
    180_000,
  );
});
