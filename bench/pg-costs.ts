/**
 * Load-independent costs of okengine on PostgreSQL: statements (round trips)
 * and commits per job or run, counted at the client, plus the server's
 * pg_stat_database deltas (commits, rows written) for the bench database.
 * Wall-clock rates on a shared machine swing with load; these counts do not.
 *
 *   node --import tsx bench/pg-costs.ts [s5|s3|s9|s9-32|sleep|all] [--cpu-prof via node]
 *
 * Each scenario runs a whole app (createApp) on a fresh schema, as
 * bench/compare does: S5 1 000 keys × 50 and S3 50 000 unkeyed at concurrency
 * 32 / prefetch 500; S9 3-step durable runs one at a time and 32 at a time.
 */
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow, on, signal } from "../src/index.ts";

/** The root `pg` (the one src/ uses), not bench/node_modules' copy the peers use. */
const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const logger = benchLogger();

/** Counts every query the process sends, by a short label (the CTE names or first words). */
const counts = new Map<string, number>();
let total = 0;
let commits = 0;
let inTx = false;
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const origQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...args: unknown[]): unknown {
  const first = args[0];
  const text = typeof first === "string" ? first : ((first as { text?: string } | undefined)?.text ?? "");
  const label = labelOf(text);
  counts.set(label, (counts.get(label) ?? 0) + 1);
  total++;
  const head = text.trim().slice(0, 8).toUpperCase();
  if (head.startsWith("BEGIN")) inTx = true;
  else if (head.startsWith("COMMIT")) {
    inTx = false;
    commits++;
  } else if (head.startsWith("ROLLBACK")) inTx = false;
  // A statement outside BEGIN that writes is its own commit (a WITH … UPDATE included, and a call of
  // the journal's writing functions, migrations 0017 and 0018).
  else if (!inTx && /\b(INSERT|UPDATE|DELETE|journal_append\w*|run_finish\w*)\b/i.test(text)) commits++;
  const t0 = performance.now();
  const record = (r: { rowCount?: number | null } | undefined): void => {
    spent.set(label, (spent.get(label) ?? 0) + performance.now() - t0);
    rowsOf.set(label, (rowsOf.get(label) ?? 0) + (r?.rowCount ?? 0));
  };
  const cb = args.at(-1);
  if (typeof cb === "function")
    args[args.length - 1] = (err: unknown, r: { rowCount?: number | null } | undefined) => {
      record(r);
      (cb as (e: unknown, r: unknown) => void)(err, r);
    };
  const cfg = args[0] as { callback?: unknown } | undefined;
  if (typeof cfg === "object" && cfg !== null && typeof cfg.callback === "function") {
    const inner = cfg.callback as (e: unknown, r: unknown) => void;
    cfg.callback = (err: unknown, r: { rowCount?: number | null } | undefined) => {
      record(r);
      inner(err, r);
    };
  }
  const out = origQuery.apply(this, args);
  if (out instanceof Promise) void out.then(record, () => undefined);
  return out;
} as typeof pg.Client.prototype.query;
// OKE_EXPLAIN=1 with PGOPTIONS="-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=40
// -c auto_explain.log_analyze=on -c auto_explain.log_level=notice": slow plans printed as notices.
if (process.env.OKE_EXPLAIN === "1") {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
  const origConnect = pg.Client.prototype.connect as (...a: unknown[]) => unknown;
  pg.Client.prototype.connect = function (this: pgTypes.Client, ...args: unknown[]): unknown {
    this.on("notice", (n) => console.log(`NOTICE ${n.message ?? ""}`));
    return origConnect.apply(this, args);
  } as typeof pg.Client.prototype.connect;
}
/** Client-observed time per label (round trip incl. queueing for a pool client: relative shares only). */
const spent = new Map<string, number>();
const rowsOf = new Map<string, number>();

function labelOf(text: string): string {
  const t = text.replace(/\s+/g, " ").trim();
  const ctes = [...t.matchAll(/(?:WITH(?: RECURSIVE)?|,)\s*([a-z_]+) (?:\([^)]*\) )?AS \(/gi)].map(
    (m) => m[1],
  );
  if (ctes.length > 0) return `with ${ctes.slice(0, 3).join(",")}`;
  return t.slice(0, 48);
}

function reset(): void {
  counts.clear();
  spent.clear();
  rowsOf.clear();
  total = 0;
  commits = 0;
}

async function dbStats(): Promise<{ commits: number; written: number }> {
  const c = new pg.Client({ connectionString: DB_URL });
  await c.connect();
  try {
    const { rows } = await c.query<{ x: string; w: string }>(
      `SELECT xact_commit AS x, tup_inserted + tup_updated + tup_deleted AS w FROM pg_stat_database WHERE datname = current_database()`,
    );
    return { commits: Number(rows[0]!.x), written: Number(rows[0]!.w) };
  } finally {
    await c.end();
  }
}

function report(
  label: string,
  units: number,
  unit: string,
  ms: number,
  server: { commits: number; written: number },
): void {
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
  console.log(
    `\n${label}: ${units} ${unit} in ${ms.toFixed(0)} ms (wall clock, shared machine: sanity only)\n` +
      `  client: ${(total / units).toFixed(3)} statements/${unit}, ${(commits / units).toFixed(3)} writing commits/${unit}\n` +
      `  server (pg_stat_database, whole database: other sessions included): ${(server.commits / units).toFixed(3)} commits/${unit}, ${(server.written / units).toFixed(2)} rows written/${unit}`,
  );
  for (const [k, n] of top)
    console.log(
      `    ${String(n).padStart(7)}  ${(n / units).toFixed(3)}/${unit}  rows ${String(rowsOf.get(k) ?? 0).padStart(6)}  ${((spent.get(k) ?? 0) / n).toFixed(2).padStart(7)} ms each  ${k}`,
    );
}

async function dropSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: DB_URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}

async function drain(label: string, n: number, keys: number): Promise<void> {
  const schema = `perfpg_costs_${process.pid}_${keys}`;
  await dropSchema(schema);
  const jobs = signal.once<{ j: number }>("bench.jobs", { retries: 3 });
  const last = new Map<string, number>();
  let violations = 0;
  let handled = 0;
  const work = on(
    jobs,
    flow<{ j: number; k: string | null }, void>("bench.job", {
      do: (p) => {
        handled++;
        if (p.k !== null) {
          if ((last.get(p.k) ?? -1) > p.j) violations++;
          last.set(p.k, p.j);
        }
      },
    }),
  );
  const app = createApp({
    modules: [{ exports: { jobs, work } }],
    env: "prod",
    logger,
    config: {
      console: { port: false },
      drivers: { journal: "postgres", send: "memory" },
      database: { url: DB_URL, schema },
      signals: { concurrency: 32, prefetch: 500 },
    },
  });
  await app.store.open();
  const now = Date.now();
  const perKey = keys > 0 ? n / keys : 0;
  const all = [];
  for (let j = 0, i = 0; i < n; j++)
    for (let k = 0; k < Math.max(1, keys) && i < n; k++, i++)
      all.push({
        id: `${now.toString(36)}-${i}`,
        signal: "bench.jobs",
        key: keys > 0 ? `k${k}` : null,
        payload: { j: keys > 0 ? j : i, k: keys > 0 ? `k${k}` : null },
        parentRunId: null,
      });
  void perKey;
  for (let i = 0; i < all.length; i += 5_000) await app.store.enqueue(all.slice(i, i + 5_000), now);
  const before = await dbStats();
  reset();
  const t0 = performance.now();
  await app.boot();
  await app.idle({ timeoutMs: 600_000 });
  const ms = performance.now() - t0;
  const after = await dbStats();
  report(label, n, "job", ms, {
    commits: after.commits - before.commits - 1,
    written: after.written - before.written,
  });
  if (handled !== n) console.log(`  !! handled ${handled} of ${n}`);
  if (keys > 0) console.log(`  order violations: ${violations}`);
  await app.stop();
  await dropSchema(schema);
}

async function workflows(label: string, n: number, parallel: number, sleep: boolean): Promise<void> {
  const schema = `perfpg_costs_wf_${process.pid}_${parallel}`;
  await dropSchema(schema);
  const delays: number[] = [];
  const dueAt = new Map<number, number>();
  const wf = flow<{ i: number }, number>("bench.wf", {
    durable: true,
    do: async (input, fx) => {
      const a = await fx.step("one", () => input.i + 1);
      if (sleep) {
        // The due time of the first execution: the resumed run replays this code, so a due time
        // taken there would be a second late (kept outside the journal so no statement is added).
        if (!dueAt.has(input.i)) dueAt.set(input.i, Date.now() + 1_000);
        await fx.clock.sleep("nap", "1s");
        if (input.i >= 0) delays.push(Date.now() - dueAt.get(input.i)!);
        return a;
      }
      const b = await fx.step("two", () => a + 1);
      return fx.step("three", () => b + 1);
    },
  });
  const app = createApp({
    modules: [{ exports: { wf } }],
    env: "prod",
    logger,
    config: {
      console: { port: false },
      drivers: { journal: "postgres", send: "memory" },
      database: { url: DB_URL, schema },
    },
  });
  await app.boot();
  await app.invoke(wf, { i: -1 }); // warm-up
  const before = await dbStats();
  reset();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) {
        const i = next++;
        await app.invoke(wf, { i });
      }
    }),
  );
  // A sleeping run's invoke answers when it parks; its wake comes a second later. Count until every
  // run has woken (30 s at most), so the statements of the wakes are in the figures and the delays exist.
  for (let i = 0; sleep && delays.length < n && i < 300; i++) await new Promise((r) => setTimeout(r, 100));
  const ms = performance.now() - t0;
  const after = await dbStats();
  report(label, n, "run", ms, {
    commits: after.commits - before.commits - 1,
    written: after.written - before.written,
  });
  if (sleep) {
    delays.sort((a, b) => a - b);
    console.log(
      delays.length === 0
        ? `  wake delay: no run woke within 30 s`
        : `  wake delay (Date.now granularity) over ${delays.length} of ${n} runs: p50 ${delays[delays.length >> 1]} ms, max ${delays.at(-1)} ms`,
    );
  }
  await app.stop();
  await dropSchema(schema);
}

const which = process.argv[2] ?? "all";
if (which === "s5" || which === "all") await drain("S5 keyed drain, 1 000 keys × 50", 50_000, 1_000);
if (which === "s5q") await drain("S5 keyed drain, 100 keys × 20", 2_000, 100);
if (which === "s3" || which === "all") await drain("S3 unkeyed drain", 50_000, 0);
if (which === "s9" || which === "all") await workflows("S9 3-step workflows, 1 at a time", 300, 1, false);
if (which === "s9-32" || which === "all")
  await workflows("S9 3-step workflows, 32 at a time", 2_000, 32, false);
if (which === "sleep" || which === "all") await workflows("S9 1 s sleep, 20 at a time", 20, 20, true);
