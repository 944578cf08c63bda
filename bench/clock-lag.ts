/**
 * Fire lag of schedules: 100 `every("1s")` clocks on 3 app processes sharing
 * one PostgreSQL schema. Lag = handler start − slot (same host, so the clocks
 * agree). Counts duplicate first attempts (must be 0) and slots skipped.
 *
 *   node --import tsx bench/clock-lag.ts [seconds=30] [clocks=100] [instances=3]
 *
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { randomName } from "./compare/run-id.ts";

const [seconds = 30, clocks = 100, instances = 3] = process.argv.slice(2).map(Number);
const url = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = randomName("oke_bench_clock");
const child = fileURLToPath(new URL("./clock-child.ts", import.meta.url));

const admin = new pg.Pool({ connectionString: url, max: 2 });
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
const s = createPostgresStore({ connectionString: url, schema });
await s.open();
await s.close();

const load0 = loadavg()[0]!;
const starts: Array<{
  clock: number;
  slot: number;
  at: number;
  attempt: number;
  firedAt: number;
  instance: number;
}> = [];
/** Each instance's fireBatch calls (start, end, requests, won) and its event-loop delay over the run. */
const batches: Array<{ t0: number; t1: number; reqs: number; won: number; instance: number }> = [];
const loopDelay: Array<{ p50: number; p99: number; max: number }> = [];
const procs = Array.from({ length: instances }, (_, instance) => {
  const p = spawn(process.execPath, ["--import", "tsx", child], {
    env: { ...process.env, DATABASE_URL: url, OKE_SCHEMA: schema, CLOCKS: String(clocks) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const ready = new Promise<void>((resolve) => {
    createInterface({ input: p.stdout }).on("line", (line) => {
      if (line === "ready") return resolve();
      const [tag, ...rest] = line.split(" ");
      const v = rest.map(Number);
      if (tag === "F") batches.push({ t0: v[0]!, t1: v[1]!, reqs: v[2]!, won: v[3]!, instance });
      else if (tag === "L") loopDelay.push({ p50: v[0]!, p99: v[1]!, max: v[2]! });
      else
        starts.push({ clock: Number(tag), slot: v[0]!, at: v[1]!, attempt: v[2]!, firedAt: v[3]!, instance });
    });
  });
  return { p, ready, exited: new Promise((r) => p.on("exit", r)) };
});
await Promise.all(procs.map((x) => x.ready));
const from = Math.ceil(Date.now() / 1000) * 1000 + 2_000;
await new Promise((r) => setTimeout(r, seconds * 1000 + 3_000));
const to = from + seconds * 1000;
for (const x of procs) x.p.kill("SIGTERM");
await Promise.all(procs.map((x) => x.exited));

const window = starts.filter((x) => x.slot >= from && x.slot < to && x.attempt === 1);
const perSlot = new Map<string, number>();
for (const x of window) perSlot.set(`${x.clock}@${x.slot}`, (perSlot.get(`${x.clock}@${x.slot}`) ?? 0) + 1);
const duplicates = [...perSlot.values()].filter((n) => n > 1).length;
const expected = clocks * seconds;
const sorted = (xs: number[]): number[] => xs.sort((a, b) => a - b);
const pctOf = (xs: readonly number[], p: number): number =>
  xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
const lags = sorted(window.map((x) => x.at - x.slot));
const pct = (p: number): number => pctOf(lags, p);
const spread = (xs: number[]) => {
  const s = sorted(xs);
  return { p50: pctOf(s, 50), p90: pctOf(s, 90), p99: pctOf(s, 99), max: s.at(-1) ?? NaN };
};
// What a fire's lag is made of: the check starting late (timer + event loop: firedAt − slot), the
// fireBatch round trip of the batch that won it, and its handler starting after that batch returned.
const won = batches.filter((b) => b.won > 0 && b.t0 >= from - 1_000 && b.t0 < to);
// The statement that wrote a fire: its instance's latest one of that check to return before the handler.
const batchOf = (x: (typeof window)[number]) =>
  won
    .filter((b) => b.instance === x.instance && b.t0 >= x.firedAt && b.t0 - x.firedAt < 1_000 && b.t1 <= x.at)
    .sort((a, b) => b.t1 - a.t1)[0];
const parts = window.map((x) => ({ x, b: batchOf(x) }));
const breakdownMs = {
  checkLate: spread(window.map((x) => x.firedAt - x.slot)),
  fireBatch: spread(won.map((b) => b.t1 - b.t0)),
  beforeBatch: spread(parts.flatMap(({ x, b }) => (b ? [b.t0 - x.firedAt] : []))),
  afterBatch: spread(parts.flatMap(({ x, b }) => (b ? [x.at - b.t1] : []))),
  statementsWonPerSecond: won.length / seconds,
  statementsWonOfAll: `${won.length}/${batches.filter((b) => b.t0 >= from - 1_000 && b.t0 < to).length}`,
};
// Each second's latest start and how many instances ran its slots: the p99 of a run is its worst seconds.
const bySecond = new Map<number, { lag: number; instances: Set<number> }>();
for (const x of window) {
  const e = bySecond.get(x.slot) ?? { lag: 0, instances: new Set<number>() };
  e.lag = Math.max(e.lag, x.at - x.slot);
  e.instances.add(x.instance);
  bySecond.set(x.slot, e);
}
const worstSeconds = [...bySecond.values()]
  .sort((a, b) => b.lag - a.lag)
  .slice(0, 5)
  .map((e) => ({ lagMs: e.lag, instances: e.instances.size }));
const { rows } = await admin.query<{ n: string }>(
  `SELECT count(*)::text AS n FROM "${schema}".schedule_fires WHERE slot >= $1 AND slot < $2`,
  [from, to],
);
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await admin.end();
console.log(
  JSON.stringify(
    {
      clocks,
      instances,
      seconds,
      slotsExpected: expected,
      slotsFired: Number(rows[0]!.n),
      slotsRun: perSlot.size,
      duplicates,
      lagMs: { p50: pct(50), p90: pct(90), p99: pct(99), max: lags.at(-1) },
      worstSeconds,
      breakdownMs,
      eventLoopDelayMs: loopDelay,
      loadavg1: { before: Number(load0.toFixed(2)), after: Number(loadavg()[0]!.toFixed(2)) },
    },
    null,
    2,
  ),
);
