/**
 * S9 A/B on PostgreSQL for a loaded machine: two source trees (e.g. a copy of main from
 * `git archive` and a worktree) each boot an app in this one process on one database, and their
 * batches alternate — 60 3-step runs one at a time, then 8 staggered 300 ms sleeps, per tree per
 * round. Reports per run: statements (client), Node CPU, PostgreSQL CPU (utime + stime of the app's
 * own backends, from /proc, found by application_name), run latency, and the wake delay of the sleeps.
 * CPU and statements hold under load; the wall-clock figures only compare within one run.
 *
 *   node --import tsx bench/s9-ab.ts <treeA> <treeB> [--rounds=8]
 *
 * A tree needs node_modules (a symlink to this checkout's works); both load the root `pg`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";

// The root package's pg (the one src/ loads), not bench/node_modules' copy.
const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const trees = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const rounds = Number(process.argv.find((a) => a.startsWith("--rounds="))?.split("=")[1] ?? "8");
if (trees.length === 0) throw new Error("usage: bench/s9-ab.ts <treeA> [treeB …] [--rounds=8]");

let counting: number | null = null;
const statements: number[] = trees.map(() => 0);
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const query = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...a: unknown[]) {
  if (counting !== null) statements[counting]!++;
  return query.apply(this, a);
} as typeof pg.Client.prototype.query;

interface Side {
  tree: string;
  schema: string;
  app: {
    boot(): Promise<void>;
    stop(o: { timeoutMs: number }): Promise<void>;
    invoke(f: unknown, i: unknown): Promise<unknown>;
  };
  three: unknown;
  sleeper: unknown;
}

const sleptAt = new Map<string, number>();
const woke = new Map<string, (delay: number) => void>();
const SLEEP_MS = 300;
const sides: Side[] = [];
for (const [k, tree] of trees.entries()) {
  // Each tree's own src: the two apps share nothing but the database and pg.
  const { createApp, flow } = (await import(`${tree}/src/index.ts`)) as typeof import("../src/index.ts");
  const three = flow<{ i: number }, number>("bench.three", {
    durable: true,
    do: async ({ i }, fx) => {
      const a = await fx.step("a", () => i + 1);
      const b = await fx.step("b", () => a * 2);
      return fx.step("c", () => b + 1);
    },
  });
  const sleeper = flow<{ i: string }, void>("bench.sleep", {
    durable: true,
    do: async ({ i }, fx) => {
      // Code before a sleep runs again on resume: only the first pass stamps the start.
      if (!sleptAt.has(i)) sleptAt.set(i, performance.now());
      await fx.clock.sleep("nap", "300ms");
      woke.get(i)?.(performance.now() - sleptAt.get(i)! - SLEEP_MS);
    },
  });
  const schema = `s9ab_${process.pid}_${k}`;
  const app = createApp({
    modules: [{ exports: { three, sleeper } }],
    env: "prod",
    logger: benchLogger(),
    root: tree,
    config: {
      console: { port: false },
      drivers: { journal: "postgres", send: "memory" },
      database: { url: DB_URL, schema },
      durable: { concurrency: 32 },
    },
  }) as unknown as Side["app"];
  await app.boot();
  sides.push({ tree, schema, app, three, sleeper });
}

const probe = new pg.Client({ connectionString: DB_URL });
await probe.connect();
/** CPU ticks (1/100 s) of each backend serving this app's pool. */
async function backendTicks(schema: string): Promise<Map<number, number>> {
  const { rows } = await probe.query<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
    [`okengine:${schema}`],
  );
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      out.set(pid, Number(f[11]) + Number(f[12]));
    } catch {
      // The backend ended between the two reads.
    }
  }
  return out;
}

const latency = sides.map((): number[] => []);
const wakes = sides.map((): number[] => []);
const nodeCpu = sides.map(() => 0);
const pgCpu = sides.map(() => 0);
const runs = sides.map(() => 0);
/** Per round and tree: Node CPU, PostgreSQL CPU (ms per run) and the run p50 (ms). */
const perRound = sides.map((): { node: number; pg: number; p50: number }[] => []);
let id = 0;
for (let r = 0; r < rounds; r++) {
  for (const [k, side] of sides.entries()) {
    const t0 = await backendTicks(side.schema);
    counting = k;
    const c0 = process.cpuUsage();
    const round: number[] = [];
    for (let j = 0; j < 60; j++) {
      const t = performance.now();
      await side.app.invoke(side.three, { i: id++ });
      round.push(performance.now() - t);
    }
    const c = process.cpuUsage(c0);
    counting = null;
    latency[k]!.push(...round);
    nodeCpu[k]! += (c.user + c.system) / 1_000;
    runs[k]! += 60;
    let pgRound = 0;
    for (const [pid, v] of await backendTicks(side.schema)) pgRound += (v - (t0.get(pid) ?? 0)) * 10;
    pgCpu[k]! += pgRound;
    perRound[k]!.push({ node: (c.user + c.system) / 1_000 / 60, pg: pgRound / 60, p50: median(round) });
    await Promise.all(
      Array.from({ length: 8 }, async (_, s) => {
        await new Promise((res) => setTimeout(res, s * 15));
        const i = `${k}-${id++}`;
        const delay = new Promise<number>((res) => woke.set(i, res));
        await side.app.invoke(side.sleeper, { i });
        wakes[k]!.push(await delay);
      }),
    );
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
const at = (xs: number[], p: number): string => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))]!.toFixed(2);
};
for (const [k, side] of sides.entries()) {
  const l = latency[k]!;
  const w = wakes[k]!;
  console.log(
    `${side.tree}: run ms p25 ${at(l, 0.25)} p50 ${at(l, 0.5)} p90 ${at(l, 0.9)} | statements/run ${(statements[k]! / runs[k]!).toFixed(2)}` +
      ` | Node CPU ${(nodeCpu[k]! / runs[k]!).toFixed(3)} ms/run, PostgreSQL CPU ${(pgCpu[k]! / runs[k]!).toFixed(3)} ms/run` +
      ` | wake ms p25 ${at(w, 0.25)} p50 ${at(w, 0.5)} p90 ${at(w, 0.9)} (${w.length} sleeps)`,
  );
}
for (const [k, side] of sides.entries()) {
  const f = (pick: (r: { node: number; pg: number; p50: number }) => number): string =>
    perRound[k]!.map((r) => pick(r).toFixed(2)).join(" / ");
  console.log(
    `${side.tree} per round: Node CPU ${f((r) => r.node)} | PostgreSQL CPU ${f((r) => r.pg)} | run p50 ${f((r) => r.p50)}`,
  );
}
for (const side of sides) {
  await side.app.stop({ timeoutMs: 5_000 });
  await probe.query(`DROP SCHEMA IF EXISTS "${side.schema}" CASCADE`);
}
await probe.end();
process.exit(0);
