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
  /** S10: jobs drained, and latency samples taken, on each table state. */
  bigDrain: number;
  bigLatency: number;
  /** S10: interleaved rounds (empty, big; then big, empty; …), median of their ratios. */
  bigRounds: number;
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
        bigRounds: 1,
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
        bigRounds: 3,
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
 * first round). The schema is reset after the round.
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

/**
 * S10 (issue 17's S14): big tables vs empty, okengine on PostgreSQL. `bigRounds` rounds, the two states
 * interleaved (order alternating), each on its own schema reset between rounds: one sample each swung
 * 0.86–0.92× (drain) and 0.82–1.26× (latency) between full runs. Each figure is the median of the rounds'
 * ratios (big ÷ the empty round beside it).
 */
export async function s10(system: QueueSystem, ctx: Ctx, ps: ProductionSizes): Promise<Figure[]> {
  const emptyNs = await system.fresh();
  const bigNs = await system.fresh();
  let before: Sizes | undefined;
  let after: Sizes | undefined;
  const empty: Array<{ rate: number; p50: number; duplicates: number }> = [];
  const big: typeof empty = [];
  try {
    for (let i = 0; i < Math.max(1, ps.bigRounds); i++) {
      const order = i % 2 === 0 ? (["empty", "big"] as const) : (["big", "empty"] as const);
      for (const state of order) {
        ctx.progress.tick(`round ${i + 1}: ${state} tables`);
        if (state === "empty") {
          empty.push(await drainAndLatency(system, ps, emptyNs));
          await resetRound(emptyNs.name);
          continue;
        }
        const fill =
          before === undefined
            ? async () => {
                ctx.progress.tick(
                  `inserting ${ps.bigMessages} delivered messages + ${ps.bigRuns} finished runs`,
                );
                await fillRetained(bigNs.name, ps.bigMessages, ps.bigRuns);
                before = await tableSizes(bigNs.name);
              }
            : undefined;
        big.push(await drainAndLatency(system, ps, bigNs, fill));
        // The sizes after the first drain, as before this change (its 100 000 delivered rows included).
        if (big.length === 1) after = await tableSizes(bigNs.name);
        await resetRound(bigNs.name);
      }
    }
  } finally {
    await system.drop(emptyNs);
    await system.drop(bigNs);
  }
  const drains = big.map((b, i) => b.rate / empty[i]!.rate);
  const lats = big.map((b, i) => b.p50 / empty[i]!.p50);
  const duplicates = [...big, ...empty].reduce((n, r) => n + r.duplicates, 0);
  const list = (xs: readonly number[], d: number): string => xs.map((x) => x.toFixed(d)).join(" / ");
  const sizes = `before the drain: messages ${before?.messages} + indexes ${before?.indexes}, runs + journal ${before?.runs}; after the first: messages ${after?.messages} + indexes ${after?.indexes}`;
  const what = `${ps.bigMessages.toLocaleString("en")} delivered messages + ${ps.bigRuns.toLocaleString("en")} finished runs retained`;
  return [
    figure("S10", "big tables: drain ÷ empty tables", "×", "higher", system, drains, {
      note: `${what}; ${big.length} interleaved round(s), median; drain per round ${list(
        big.map((b) => b.rate),
        0,
      )} vs ${list(
        empty.map((b) => b.rate),
        0,
      )} jobs/s (${ps.bigDrain} jobs, concurrency 32)${duplicates > 0 ? `; ${duplicates} duplicate handler call(s) (not counted as jobs)` : ""}; ${sizes}`,
    }),
    figure("S10", "big tables: latency p50 ÷ empty tables", "×", "lower", system, lats, {
      note: `p50 per round ${list(
        big.map((b) => b.p50),
        2,
      )} vs ${list(
        empty.map((b) => b.p50),
        2,
      )} ms (${ps.bigLatency} samples one at a time)`,
    }),
  ];
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
