/**
 * S14–S16 of `npm run bench`: figures measured by the stand-alone scripts
 * (bench/broadcast-latency.ts, bench/sse-streams.ts, bench/clock-lag.ts), each
 * run as a child process on the bench database and read from the JSON it
 * prints, plus graphile-worker's crontab fire lag beside S16.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { deletePrefix } from "./bullmq.ts";
import { DATABASE_URL, REDIS, dropSchema, median, peer, percentile, randomName, sleep } from "./env.ts";
import { graphileSystem } from "./graphile.ts";
import { forwardStderr } from "./logger.ts";
import type { Ctx } from "./scenario-kit.ts";
import type { Figure, ScenarioId } from "./types.ts";

const OKENGINE = "okengine-postgres";
const script = (name: string): string => fileURLToPath(new URL(`../${name}`, import.meta.url));

/** One start of a scheduled job: its schedule's id, the slot it was due at, when its handler began. */
interface SlotStart {
  id: string;
  due: number;
  at: number;
}

/** The starts due in [from, to): their lags, sorted, and how many slots ran and ran more than once. */
function slotLags(starts: readonly SlotStart[], from: number, to: number, slotsExpected: number) {
  const window = starts.filter((s) => s.due >= from && s.due < to);
  const perSlot = new Map<string, number>();
  for (const s of window) perSlot.set(`${s.id}@${s.due}`, (perSlot.get(`${s.id}@${s.due}`) ?? 0) + 1);
  const lags = window.map((s) => s.at - s.due).sort((a, b) => a - b);
  const checks = {
    slotsExpected,
    slotsRun: perSlot.size,
    duplicates: [...perSlot.values()].filter((n) => n > 1).length,
  };
  return { lags, checks };
}

/**
 * The figures a script printed: one JSON object (on one line or pretty-printed);
 * a logger may print JSON lines around it, so the last block that parses and
 * carries `key`.
 */
export function figuresIn(out: string, key: string): Record<string, unknown> | undefined {
  const blocks = `\n${out}`
    .split("\n{")
    .slice(1)
    .map((b) => `{${b}`.trim());
  for (const block of blocks.reverse()) {
    try {
      const parsed = JSON.parse(block) as Record<string, unknown>;
      if (key in parsed) return parsed;
    } catch {
      continue;
    }
  }
  return undefined;
}

/** Runs a bench script and returns the JSON object of figures it printed (the last one holding `key`). */
export async function runScript(
  name: string,
  args: Array<string | number>,
  o: { gc?: boolean; ctx: Ctx; key: string },
): Promise<Record<string, unknown>> {
  const child = spawn(
    process.execPath,
    [...(o.gc ? ["--expose-gc"] : []), "--import", "tsx", script(name), ...args.map(String)],
    {
      env: { ...process.env, BENCH_DATABASE_URL: DATABASE_URL },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  // The script's warnings show here; the rest of its stderr also explains an exit without figures.
  const stderr = forwardStderr(child.stderr);
  const started = performance.now();
  const tick = setInterval(
    () => o.ctx.progress.tick(`${name}: ${((performance.now() - started) / 1000).toFixed(0)} s`),
    1_000,
  );
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  clearInterval(tick);
  const figures = code === 0 ? figuresIn(out, o.key) : undefined;
  if (figures !== undefined) return figures;
  throw new Error(`${name} exited ${String(code)} without its figures: ${(stderr() || out).slice(-300)}`);
}

const fig = (
  scenario: ScenarioId,
  metric: string,
  unit: string,
  better: "higher" | "lower",
  value: number | null,
  note?: string,
  system = OKENGINE,
  checks?: Figure["checks"],
): Figure => ({
  scenario,
  metric,
  unit,
  better,
  system,
  value,
  samples: value === null ? [] : [value],
  ...(note ? { note } : {}),
  ...(checks ? { checks } : {}),
});

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** S14: broadcast emit on instance A → handler start on instance B, one event at a time. */
export async function s14(ctx: Ctx): Promise<Figure[]> {
  const r = await runScript("broadcast-latency.ts", [ctx.sizes.s14Events], { ctx, key: "p50Ms" });
  const note = `${String(r.events)} events`;
  return [
    fig("S14", "broadcast emit → handler p50, 2 instances", "ms", "lower", num(r.p50Ms), note),
    fig("S14", "broadcast emit → handler p99, 2 instances", "ms", "lower", num(r.p99Ms), note),
  ];
}

/** S15: one instance holding N SSE streams on one tape: memory per stream, emit → last client. */
export async function s15(ctx: Ctx): Promise<Figure[]> {
  const r = await runScript("sse-streams.ts", [ctx.sizes.s15Streams, ctx.sizes.s15Emits], {
    gc: true,
    ctx,
    key: "rssPerStreamBytes",
  });
  const note = `${String(r.openStreams)} of ${String(r.streams)} streams open, ${String(r.emits)} emits`;
  return [
    fig("S15", "RSS per open SSE stream", "bytes", "lower", num(r.rssPerStreamBytes), note),
    fig("S15", "emit → last SSE client p50", "ms", "lower", num(r.lastClientP50Ms), note),
    fig("S15", "emit → last SSE client p99", "ms", "lower", num(r.lastClientP99Ms), note),
  ];
}

/**
 * S16, okengine: `every("1s")` clocks on 3 app processes; lag = handler start − slot. `s16Rounds` rounds
 * (fresh schema and processes each): each figure is the median of the rounds', its samples the rounds'.
 */
export async function s16(ctx: Ctx): Promise<Figure[]> {
  const { s16Seconds, s16Clocks, s16Instances, s16Rounds } = ctx.sizes;
  const rounds: Array<Record<string, unknown>> = [];
  for (let i = 0; i < Math.max(1, s16Rounds); i++)
    rounds.push(
      await runScript("clock-lag.ts", [s16Seconds, s16Clocks, s16Instances], { ctx, key: "lagMs" }),
    );
  const sum = (k: string): number => rounds.reduce((n, r) => n + (num(r[k]) ?? 0), 0);
  const checks = {
    slotsExpected: sum("slotsExpected"),
    slotsFired: sum("slotsFired"),
    duplicates: sum("duplicates"),
  };
  const lagOf = (p: "p50" | "p99"): number[] =>
    rounds.flatMap((r) => {
      const v = num((r.lagMs as Record<string, unknown> | undefined)?.[p]);
      return v === null ? [] : [v];
    });
  const loads = rounds.map((r) => (r.loadavg1 as { before?: number } | undefined)?.before ?? NaN);
  const note = `${s16Clocks} every("1s") clocks × ${s16Seconds} s on ${s16Instances} instances, ${rounds.length} round(s), median; ${checks.slotsFired}/${checks.slotsExpected} slots fired, ${checks.duplicates} duplicates; load ${loads.map((l) => l.toFixed(1)).join(", ")}`;
  const figureOf = (p: "p50" | "p99"): Figure => {
    const samples = lagOf(p);
    const f = fig(
      "S16",
      `fire lag ${p} (slot → handler start)`,
      "ms",
      "lower",
      samples.length ? median(samples) : null,
      note,
      OKENGINE,
      checks,
    );
    return { ...f, samples };
  };
  return [figureOf("p50"), figureOf("p99")];
}

interface GwRunner {
  stop(): Promise<void>;
}
interface GwModule {
  run(options: object): Promise<GwRunner>;
  Logger: new (factory: () => () => void) => unknown;
}

/**
 * S16, graphile-worker: the same shape at its granularity — `tasks` crontab
 * entries `* * * * *` (distinct ids), `workers` runners on one schema, for
 * `minutes` whole minutes; lag = task start − the entry's `_cron.ts`.
 * Measured in this process (the runners share its event loop).
 */
export async function s16Graphile(ctx: Ctx): Promise<Figure[]> {
  const { s16CronMinutes: minutes, s16Clocks: tasks, s16Instances: workers } = ctx.sizes;
  if (minutes <= 0)
    return [
      fig(
        "S16",
        "fire lag p50 (slot → handler start)",
        "ms",
        "lower",
        null,
        "crontab fires once a minute: full mode only",
        "graphile-worker",
      ),
    ];
  const system = graphileSystem();
  const ns = await system.fresh();
  const gw = await peer<GwModule>("graphile-worker");
  const starts: SlotStart[] = [];
  const crontab = Array.from({ length: tasks }, (_, i) => `* * * * * bench_cron ?id=c${i} {i:${i}}`).join(
    "\n",
  );
  const runners: GwRunner[] = [];
  try {
    for (let w = 0; w < workers; w++)
      runners.push(
        await gw.run({
          connectionString: DATABASE_URL,
          schema: ns.name,
          concurrency: 10,
          noHandleSignals: true,
          crontab,
          logger: new gw.Logger(() => () => undefined),
          taskList: {
            bench_cron: (payload: { i: number; _cron: { ts: string } }) => {
              starts.push({ id: `c${payload.i}`, due: Date.parse(payload._cron.ts), at: Date.now() });
            },
          },
        }),
      );
    const from = Math.ceil(Date.now() / 60_000) * 60_000;
    const to = from + minutes * 60_000;
    while (Date.now() < to + 5_000) {
      await sleep(1_000);
      ctx.progress.tick(`graphile crontab: ${starts.length} starts`);
    }
    const { lags, checks } = slotLags(starts, from, to, tasks * minutes);
    const note = `${tasks} crontab entries "* * * * *" × ${minutes} min on ${workers} runners (one process); ${checks.slotsRun}/${checks.slotsExpected} slots ran, ${checks.duplicates} duplicates`;
    return [
      fig(
        "S16",
        "fire lag p50 (slot → handler start)",
        "ms",
        "lower",
        percentile(lags, 50),
        note,
        "graphile-worker",
        checks,
      ),
      fig(
        "S16",
        "fire lag p99 (slot → handler start)",
        "ms",
        "lower",
        percentile(lags, 99),
        note,
        "graphile-worker",
        checks,
      ),
    ];
  } finally {
    for (const r of runners) await r.stop().catch(() => undefined);
    await dropSchema(ns.name);
  }
}

interface BullSchedJob {
  id?: string;
}
interface BullSchedModule {
  Queue: new (
    name: string,
    opts: object,
  ) => {
    upsertJobScheduler(id: string, repeat: object, template: object): Promise<unknown>;
    waitUntilReady(): Promise<unknown>;
    close(): Promise<void>;
  };
  Worker: new (
    name: string,
    processor: (job: BullSchedJob) => Promise<void>,
    opts: object,
  ) => { on(event: "error", fn: (e: unknown) => void): void; close(): Promise<void> };
}

/**
 * S16, BullMQ: `s16Clocks` job schedulers `{ every: 1000 }` (the API that
 * replaced repeatable jobs), `s16Instances` workers in this process, for
 * `s16Seconds`; lag = job start − its due time, which BullMQ puts in the id
 * of each scheduler job (`repeat:<scheduler id>:<due ms>`).
 */
export async function s16Bullmq(ctx: Ctx): Promise<Figure[]> {
  const { s16Seconds: seconds, s16Clocks: schedulers, s16Instances: workers } = ctx.sizes;
  const { Queue, Worker } = await peer<BullSchedModule>("bullmq");
  const prefix = randomName("okbench_sched");
  const connection = { ...REDIS, maxRetriesPerRequest: null };
  const queue = new Queue("bench_sched", { connection, prefix });
  const starts: SlotStart[] = [];
  const running: Array<{ close(): Promise<void> }> = [];
  try {
    await queue.waitUntilReady();
    for (let i = 0; i < schedulers; i++)
      await queue.upsertJobScheduler(`c${i}`, { every: 1_000 }, { name: "tick", data: { i } });
    for (let w = 0; w < workers; w++) {
      const worker = new Worker(
        "bench_sched",
        async (job) => {
          const at = Date.now();
          const m = /^repeat:(.+):(\d+)$/.exec(job.id ?? "");
          if (m) starts.push({ id: m[1]!, due: Number(m[2]), at });
        },
        { connection, prefix, concurrency: 10 },
      );
      worker.on("error", () => undefined);
      running.push(worker);
    }
    const from = Math.ceil(Date.now() / 1_000) * 1_000 + 2_000;
    const to = from + seconds * 1_000;
    while (Date.now() < to + 3_000) {
      await sleep(1_000);
      ctx.progress.tick(`BullMQ schedulers: ${starts.length} starts`);
    }
    const { lags, checks } = slotLags(starts, from, to, schedulers * seconds);
    const note = `${schedulers} job schedulers { every: 1000 } × ${seconds} s on ${workers} workers (one process); ${checks.slotsRun}/${checks.slotsExpected} slots ran, ${checks.duplicates} duplicates`;
    return (["p50", "p99"] as const).map((p) =>
      fig(
        "S16",
        `fire lag ${p} (slot → handler start)`,
        "ms",
        "lower",
        lags.length === 0 ? null : percentile(lags, p === "p50" ? 50 : 99),
        note,
        "bullmq",
        checks,
      ),
    );
  } finally {
    for (const w of running) await w.close().catch(() => undefined);
    await queue.close().catch(() => undefined);
    await deletePrefix(prefix);
  }
}
