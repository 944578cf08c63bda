/**
 * What PostgreSQL queue users hit in production (issue 17's S10 "big tables", S11 "held
 * snapshot" and S12 "idle cost"):
 * - S10: drain and latency with many delivered messages and finished runs retained, vs empty tables;
 *   table and index sizes before and after (okengine only: the peers delete or archive finished jobs).
 * - S11: a transaction held open elsewhere (REPEATABLE READ, so its snapshot pins vacuum's horizon)
 *   while jobs arrive at a steady rate: enqueue → start latency and throughput over time.
 * - S12: 10 idle instances: server transactions per second (pg_stat_database of the bench database)
 *   and this process's CPU per instance; okengine also in poll-only mode (`database.notify: false`).
 */
import { createRequire } from "node:module";
import pg from "pg";
import { benchLogger } from "./logger.ts";
import { createApp } from "../../src/index.ts";
import { benchModule, okengineConfig } from "./okengine.ts";
import { DATABASE_URL, percentile, signalled, sleep, until, withClient } from "./env.ts";
import { base, figure, inBatches, JobTally, jobs, withSystem, type Ctx } from "./scenario-kit.ts";
import type { Figure, Namespace, QueueHarness, QueueSystem } from "./types.ts";

/** Sizes of these scenarios: quick keeps each to seconds. */
export interface ProductionSizes {
  /** S10: delivered messages and finished runs inserted before the drain. */
  bigMessages: number;
  bigRuns: number;
  /** S10: jobs drained, and latency samples taken, on each table state (once per round of the run). */
  bigDrain: number;
  bigLatency: number;
  /** S11: seconds the snapshot is held, and jobs enqueued per second meanwhile. */
  heldSeconds: number;
  heldRate: number;
  /** S12: idle instances and seconds measured. */
  idleInstances: number;
  idleSeconds: number;
}

export const productionSizes = (quick: boolean): ProductionSizes =>
  quick
    ? {
        bigMessages: 100_000,
        bigRuns: 20_000,
        bigDrain: 10_000,
        bigLatency: 100,
        heldSeconds: 4,
        heldRate: 200,
        idleInstances: 10,
        idleSeconds: 3,
      }
    : {
        bigMessages: 1_000_000,
        bigRuns: 200_000,
        bigDrain: 100_000,
        bigLatency: 500,
        heldSeconds: 60,
        heldRate: 500,
        idleInstances: 10,
        idleSeconds: 30,
      };

const SIGNAL = "bench.jobs";

interface Sizes {
  messages: string;
  indexes: string;
  runs: string;
}

async function tableSizes(schema: string): Promise<Sizes> {
  return withClient(async (c) => {
    const { rows } = await c.query<{ m: string; mi: string; r: string }>(
      `SELECT pg_size_pretty(pg_table_size(format('%I.messages', $1::text)::regclass)) AS m,
              pg_size_pretty(pg_indexes_size(format('%I.messages', $1::text)::regclass)) AS mi,
              pg_size_pretty(pg_total_relation_size(format('%I.runs', $1::text)::regclass)
                           + pg_total_relation_size(format('%I.journal_entries', $1::text)::regclass)) AS r`,
      [schema],
    );
    return { messages: rows[0]!.m, indexes: rows[0]!.mi, runs: rows[0]!.r };
  });
}

/** Retained history as production leaves it: delivered messages of the signal, finished runs with a journal entry. */
export async function fillRetained(schema: string, messages: number, runs: number): Promise<void> {
  await withClient(async (c) => {
    const old = Date.now() - 3_600_000;
    for (let i = 0; i < messages; i += 200_000) {
      await c.query(
        `INSERT INTO "${schema}".messages (id, signal, key, payload, status, attempts, created_at, updated_at)
         SELECT 'old-' || g, $1, CASE WHEN g % 2 = 0 THEN 'k' || (g % 1000) END, jsonb_build_object('n', g), 'delivered', 1, $2, $2
         FROM generate_series($3::bigint, $4::bigint) g`,
        [SIGNAL, old, i, Math.min(messages, i + 200_000) - 1],
      );
    }
    await c.query(
      `INSERT INTO "${schema}".runs (id, flow, status, input, output, created_at, updated_at)
       SELECT 'run-' || g, 'bench.wf', 'completed', '{}'::jsonb, '1'::jsonb, $1, $1 FROM generate_series(1, $2::bigint) g`,
      [old, runs],
    );
    await c.query(
      `INSERT INTO "${schema}".journal_entries (run_id, seq, kind, name, value, at)
       SELECT 'run-' || g, 0, 'step', 'one', '1'::jsonb, $1 FROM generate_series(1, $2::bigint) g`,
      [old, runs],
    );
    await c.query(`VACUUM ANALYZE "${schema}".messages`);
    await c.query(`VACUUM ANALYZE "${schema}".runs`);
    // The fill's ~300 MB of WAL and dirty pages are written back now, not by a checkpoint during the
    // first big round's drain (which ran 0.62–0.87× of the empty round beside it, later rounds 0.98–1.54×).
    // CHECKPOINT needs a superuser (or pg_checkpoint): without one the drain pays for it, as before.
    await c.query("CHECKPOINT").catch(() => undefined);
  });
}

/** Back to the state a round starts from: the round's own messages deleted (the retained ones stay), vacuumed. */
async function resetRound(schema: string): Promise<void> {
  await withClient(async (c) => {
    await c.query(`DELETE FROM "${schema}".messages WHERE id NOT LIKE 'old-%'`);
    await c.query(`VACUUM ANALYZE "${schema}".messages`);
  });
}

/**
 * One round on `ns`: drain rate of a preloaded backlog (first handler start → nothing remaining), then
 * p50 of one-at-a-time latency; `fill` runs once the tables exist and the backlog is in (the big schema's
 * first round). The caller resets the schema afterwards.
 */
async function drainAndLatency(
  system: QueueSystem,
  ps: ProductionSizes,
  ns: Namespace,
  fill?: () => Promise<void>,
): Promise<{ rate: number; p50: number; duplicates: number }> {
  // Distinct jobs: a redelivered one is not progress (the latency jobs after the drain are outside it).
  const tally = new JobTally(ps.bigDrain);
  let t0 = 0;
  const finished = signalled();
  let started: ((at: number) => void) | undefined;
  const h = await system.open(
    ns,
    base(32, (c) => {
      if (t0 === 0) t0 = performance.now();
      if (tally.add(c.n) && tally.distinct === ps.bigDrain) finished.resolve();
      started?.(performance.now());
    }),
  );
  try {
    await inBatches(jobs(ps.bigDrain), (b) => (h.preload ?? h.addBulk).call(h, b));
    await fill?.();
    await h.start();
    await Promise.race([finished.promise, sleep(120_000)]);
    await until(async () => (await h.remaining()) === 0, 60_000, 10);
    const rate = tally.distinct / ((performance.now() - t0) / 1_000);
    const duplicates = tally.duplicates;
    const lat: number[] = [];
    for (let i = 0; i < ps.bigLatency; i++) {
      const s = signalled<number>();
      started = s.resolve;
      const a = performance.now();
      await h.add({ n: ps.bigDrain + i });
      lat.push((await s.promise) - a);
    }
    lat.sort((a, b) => a - b);
    return { rate, p50: percentile(lat, 50), duplicates };
  } finally {
    await h.close();
  }
}

/** One table state's result in one round. */
export interface StateRun {
  rate: number;
  p50: number;
  duplicates: number;
}

/** What an S10 round does to a schema: the real steps by default; test/bench.test.ts passes fakes. */
export interface S10Steps {
  /** Drain and latency on `ns`; `fill` runs once the backlog is in (the big schema's first round). */
  measure(ns: Namespace, fill?: () => Promise<void>): Promise<StateRun>;
  fill(ns: Namespace): Promise<void>;
  sizes(ns: Namespace): Promise<Sizes>;
  /** Back to the round's starting state: the round's own messages gone, the retained ones kept. */
  reset(ns: Namespace): Promise<void>;
}

const realSteps = (system: QueueSystem, ps: ProductionSizes): S10Steps => ({
  measure: (ns, fill) => drainAndLatency(system, ps, ns, fill),
  fill: (ns) => fillRetained(ns.name, ps.bigMessages, ps.bigRuns),
  sizes: (ns) => tableSizes(ns.name),
  reset: (ns) => resetRound(ns.name),
});

export interface S10Session {
  /**
   * Round `round` (0-based) of the run: both states, empty first in even rounds and big first in odd
   * ones; one figure each for drain and latency, big ÷ the empty measured beside it. `last` drops the
   * schemas afterwards.
   */
  round(ctx: Ctx, round: number, last: boolean): Promise<Figure[]>;
  /** Drops both schemas (a no-op when already dropped); a later round starts over with a fresh fill. */
  close(): Promise<void>;
}

/**
 * S10 (issue 17's S14): big tables vs empty, okengine on PostgreSQL, one interleaved pair in every round
 * of the run; run.ts merges the rounds' figures into the median of their ratios, as for S3. S10 used to
 * run its three pairs back to back in the run's first round, so whatever else the shared machine did in
 * that minute fell on all three (one full run: drain 0.80 / 0.77 / 1.03, latency 1.48 / 1.10 / 1.46, both
 * targets missed); spread over the run, it falls on one round of S10 as on one round of S3.
 *
 * The two schemas live from the first round to the last and are reset between rounds, not rebuilt: the
 * fill (1 200 000 rows, VACUUM ANALYZE, CHECKPOINT) is the slow part of S10, and redoing it per round
 * would triple that cost and put its writeback beside every big round instead of only before the first.
 * The empty schema is kept too, so both states carry the same history of drains, deletes and vacuums.
 * A failed round drops both, so the next one starts over on fresh schemas.
 */
export function s10Session(
  system: QueueSystem,
  ps: ProductionSizes,
  steps: S10Steps = realSteps(system, ps),
): S10Session {
  let schemas: { empty: Namespace; big: Namespace } | undefined;
  let filled = false;
  // The notes of every round are joined by run.ts: the description goes in the first round's only.
  let described = false;
  const close = async (): Promise<void> => {
    const held = schemas;
    schemas = undefined;
    filled = false;
    if (!held) return;
    await system.drop(held.empty);
    await system.drop(held.big);
  };
  const round = async (ctx: Ctx, r: number, last: boolean): Promise<Figure[]> => {
    try {
      schemas ??= { empty: await system.fresh(), big: await system.fresh() };
      const ns = schemas;
      const order = r % 2 === 0 ? (["empty", "big"] as const) : (["big", "empty"] as const);
      let sizes = "";
      const measure = async (state: "empty" | "big"): Promise<StateRun> => {
        ctx.progress.tick(`${state} tables`);
        if (state === "empty") {
          const got = await steps.measure(ns.empty);
          await steps.reset(ns.empty);
          return got;
        }
        let before: Sizes | undefined;
        const fill = filled
          ? undefined
          : async () => {
              ctx.progress.tick(
                `inserting ${ps.bigMessages} delivered messages + ${ps.bigRuns} finished runs`,
              );
              await steps.fill(ns.big);
              filled = true;
              before = await steps.sizes(ns.big);
            };
        const got = await steps.measure(ns.big, fill);
        if (before) {
          // The sizes after the first drain, as before (its 100 000 delivered rows included).
          const after = await steps.sizes(ns.big);
          sizes = `before the drain: messages ${before.messages} + indexes ${before.indexes}, runs + journal ${before.runs}; after the first: messages ${after.messages} + indexes ${after.indexes}; `;
        }
        await steps.reset(ns.big);
        return got;
      };
      const first = await measure(order[0]);
      const second = await measure(order[1]);
      const [empty, big] = order[0] === "empty" ? [first, second] : [second, first];
      const duplicates = empty.duplicates + big.duplicates;
      const which = `round ${r + 1} (${order.join(" first, then ")})`;
      const head = described
        ? ""
        : `${ps.bigMessages.toLocaleString("en")} delivered messages + ${ps.bigRuns.toLocaleString("en")} finished runs retained, the tables built once and reused by every round; big vs empty tables in every round (the order alternating), median of the rounds' ratios; ${ps.bigDrain} jobs, concurrency 32; ${sizes}`;
      described = true;
      return [
        figure("S10", "big tables: drain ÷ empty tables", "×", "higher", system, [big.rate / empty.rate], {
          note: `${head}${which}: ${big.rate.toFixed(0)} vs ${empty.rate.toFixed(0)} jobs/s${duplicates > 0 ? `, ${duplicates} duplicate handler call(s) (not counted as jobs)` : ""}`,
        }),
        figure("S10", "big tables: latency p50 ÷ empty tables", "×", "lower", system, [big.p50 / empty.p50], {
          note: `${head ? `${ps.bigLatency} samples one at a time; ` : ""}${which}: p50 ${big.p50.toFixed(2)} vs ${empty.p50.toFixed(2)} ms`,
        }),
      ];
    } catch (e) {
      await close().catch(() => undefined);
      throw e;
    } finally {
      if (last) await close();
    }
  };
  return { round, close };
}

/** S11 (issue 17's S15): a snapshot held open while jobs arrive at a steady rate. */
export async function s11(system: QueueSystem, ctx: Ctx, ps: ProductionSizes): Promise<Figure[]> {
  const sentAt = new Map<number, number>();
  const lat: Array<{ at: number; ms: number }> = [];
  const holder = new pg.Client({ connectionString: DATABASE_URL });
  await holder.connect();
  try {
    return await withSystem(
      system,
      base(32, (c) => {
        const t = sentAt.get(c.n);
        if (t !== undefined && c.attempt === 1)
          lat.push({ at: performance.now(), ms: performance.now() - t });
      }),
      async (h: QueueHarness) => {
        await h.start();
        await sleep(200);
        // REPEATABLE READ keeps the first snapshot for the whole transaction: vacuum cannot remove
        // any row version deleted or updated after it, as a long report or a forgotten session would.
        await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
        await holder.query("SELECT count(*) FROM pg_class");
        const t0 = performance.now();
        const end = t0 + ps.heldSeconds * 1_000;
        let n = 0;
        const tickMs = 20;
        const perTick = Math.max(1, Math.round((ps.heldRate * tickMs) / 1_000));
        while (performance.now() < end) {
          const tick = performance.now();
          const batch = [];
          for (let i = 0; i < perTick; i++) {
            sentAt.set(n, performance.now());
            batch.push(h.add({ n: n++ }));
          }
          await Promise.all(batch);
          ctx.progress.tick(`${n} enqueued, ${lat.length} started (snapshot held)`);
          await sleep(Math.max(0, tickMs - (performance.now() - tick)));
        }
        await holder.query("COMMIT");
        await until(async () => lat.length >= n, 30_000, 20);
        const window = (from: number, to: number) =>
          lat
            .filter((x) => x.at - t0 >= from * 1_000 && x.at - t0 < to * 1_000)
            .map((x) => x.ms)
            .sort((a, b) => a - b);
        const fifth = ps.heldSeconds / 5;
        const series = [0, 1, 2, 3, 4].map((i) => {
          const w = window(i * fifth, (i + 1) * fifth);
          return w.length ? `${percentile(w, 50).toFixed(1)}/${percentile(w, 99).toFixed(1)}` : "-";
        });
        const first = window(0, fifth);
        const last = window(ps.heldSeconds - fifth, ps.heldSeconds);
        const rateLast = last.length / fifth;
        const note = `${ps.heldRate} jobs/s offered for ${ps.heldSeconds} s with a REPEATABLE READ transaction open; latency p50/p99 ms per fifth of the window: ${series.join(", ")}; ${lat.length} of ${n} started`;
        return [
          figure(
            "S11",
            "held snapshot: latency p50, last fifth",
            "ms",
            "lower",
            system,
            [last.length ? percentile(last, 50) : NaN],
            { note },
          ),
          figure("S11", "held snapshot: latency p99, last fifth", "ms", "lower", system, [
            last.length ? percentile(last, 99) : NaN,
          ]),
          figure("S11", "held snapshot: p50 last ÷ first fifth", "×", "lower", system, [
            first.length && last.length ? percentile(last, 50) / percentile(first, 50) : NaN,
          ]),
          figure("S11", "held snapshot: jobs/s started, last fifth", "jobs/s", "higher", system, [rateLast]),
        ];
      },
    );
  } finally {
    await holder.query("ROLLBACK").catch(() => undefined);
    await holder.end();
  }
}

/**
 * Statements sent by every PostgreSQL client in this process, counted at the client: okengine's `pg`
 * and the peers' copy in bench/node_modules are both patched. Exact and load-independent, unlike
 * the server's counters, which also see any other session on the bench database.
 */
let sent = 0;
const pgOf = (pkg: string): typeof pg => createRequire(new URL(pkg, import.meta.url))("pg") as typeof pg;
for (const lib of new Set([pg, pgOf("../package.json"), pgOf("../../package.json")])) {
  const proto = lib.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const orig = proto.query;
  proto.query = function (this: unknown, ...a: unknown[]): unknown {
    sent++;
    return orig.apply(this, a);
  };
}

async function serverCommits(): Promise<number> {
  return withClient(async (c) => {
    const { rows } = await c.query<{ x: string }>(
      `SELECT xact_commit + xact_rollback AS x FROM pg_stat_database WHERE datname = current_database()`,
    );
    return Number(rows[0]!.x);
  });
}

/** Transactions per second on the bench database and CPU per instance over `seconds` of idleness. */
async function idleCost(
  instances: Array<{ start(): Promise<void> }>,
  seconds: number,
): Promise<{ qps: number; sentPerS: number; cpuMsPerS: number }> {
  for (const i of instances) await i.start();
  await sleep(1_500); // boot traffic (migrations, first claims) out of the window
  const c0 = await serverCommits();
  const s0 = sent;
  const u0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(seconds * 1_000);
  const u = process.cpuUsage(u0);
  const secs = (performance.now() - t0) / 1_000;
  const sentPerS = (sent - s0) / secs;
  await sleep(600); // PostgreSQL flushes backend statistics at most once a second
  const c1 = await serverCommits();
  // Each serverCommits() is itself one transaction.
  return {
    qps: (c1 - c0 - 1) / secs,
    sentPerS,
    cpuMsPerS: (u.user + u.system) / 1_000 / secs / instances.length,
  };
}

/** S12 (issue 17's S16): 10 idle instances of a system on one namespace. */
export async function s12(system: QueueSystem, ctx: Ctx, ps: ProductionSizes): Promise<Figure[]> {
  ctx.progress.tick(`${ps.idleInstances} idle instances, ${ps.idleSeconds} s`);
  const ns = await system.fresh();
  const hs: QueueHarness[] = [];
  try {
    for (let i = 0; i < ps.idleInstances; i++) hs.push(await system.open(ns, base(4)));
    const r = await idleCost(hs, ps.idleSeconds);
    const note = `${ps.idleInstances} instances in one process, ${ps.idleSeconds} s; statements counted at the client; the server saw ${r.qps.toFixed(1)} transactions/s on the whole bench database (other sessions included)`;
    return [
      figure("S12", "idle: statements/s sent (10 instances)", "statements/s", "lower", system, [r.sentPerS], {
        note,
      }),
      figure("S12", "idle: CPU per instance", "ms/s", "lower", system, [r.cpuMsPerS]),
    ];
  } finally {
    for (const h of hs) await h.close().catch(() => undefined);
    await system.drop(ns);
  }
}

/** S12 for okengine in poll-only mode (database.notify false): what the poll fallback costs at idle. */
export async function s12Poll(system: QueueSystem, ctx: Ctx, ps: ProductionSizes): Promise<Figure[]> {
  ctx.progress.tick(`${ps.idleInstances} idle instances, poll-only, ${ps.idleSeconds} s`);
  const ns = await system.fresh();
  const apps: Array<ReturnType<typeof createApp>> = [];
  try {
    for (let i = 0; i < ps.idleInstances; i++) {
      const { exports } = benchModule({ retries: 3, handler: () => undefined });
      const cfg = okengineConfig("postgres", ns, { concurrency: 4 });
      apps.push(
        createApp({
          modules: [{ exports }],
          env: "prod",
          logger: benchLogger(),
          config: { ...cfg, database: { ...cfg.database, notify: false } },
        }),
      );
    }
    const r = await idleCost(
      apps.map((a) => ({ start: () => a.boot() })),
      ps.idleSeconds,
    );
    const note = `database.notify false, database.pollIntervalMs 5 000 (default): each tick wakes every pool (a claim) and re-reads the schedules; the server saw ${r.qps.toFixed(1)} tx/s (whole bench database)`;
    return [
      figure(
        "S12",
        "idle, poll-only: statements/s sent (10 instances)",
        "statements/s",
        "lower",
        system,
        [r.sentPerS],
        { note },
      ),
      figure("S12", "idle, poll-only: CPU per instance", "ms/s", "lower", system, [r.cpuMsPerS]),
    ];
  } finally {
    for (const a of apps) await a.stop({ timeoutMs: 2_000 }).catch(() => undefined);
    await system.drop(ns);
  }
}
