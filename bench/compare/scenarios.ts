/**
 * S1–S6 over any QueueSystem. Each measurement runs on a fresh namespace
 * (schema / temp dir / Redis prefix) that is dropped afterwards; throughput
 * scenarios stop at `capSeconds` and report the rate so far (noted).
 */
import { median, percentile, signalled, sleep, until } from "./env.ts";
import type { Progress } from "./progress.ts";
import type { Figure, HandlerCall, JobSpec, QueueHarness, QueueOptions, QueueSystem, ScenarioId, Sizes } from "./types.ts";

export const BATCH = 1_000;

type Ctx = { sizes: Sizes; progress: Progress };

const jobs = (n: number): JobSpec[] => Array.from({ length: n }, (_, i) => ({ n: i }));

/** S5's jobs, emitted round-robin across keys so every key's messages interleave with the others'. */
const keyedJobs = (keys: number, perKey: number): JobSpec[] => {
  const out: JobSpec[] = [];
  for (let j = 0; j < perKey; j++) for (let k = 0; k < keys; k++) out.push({ n: out.length, j, key: `k${k}` });
  return out;
};

async function inBatches(all: JobSpec[], fn: (batch: JobSpec[]) => Promise<void>, tick?: (done: number) => void): Promise<void> {
  for (let i = 0; i < all.length; i += BATCH) {
    await fn(all.slice(i, i + BATCH));
    tick?.(Math.min(all.length, i + BATCH));
  }
}

/** Opens a fresh namespace, runs `fn`, always closes and drops. */
async function withSystem<T>(system: QueueSystem, options: QueueOptions, fn: (h: QueueHarness) => Promise<T>): Promise<T> {
  const ns = await system.fresh();
  try {
    const h = await system.open(ns, options);
    try {
      return await fn(h);
    } finally {
      await h.close();
    }
  } finally {
    await system.drop(ns);
  }
}

const noop = (): void => undefined;
const base = (concurrency: number, handler: (c: HandlerCall) => Promise<void> | void = noop): QueueOptions => ({
  concurrency,
  retries: 3,
  keyed: false,
  handler,
});

function figure(scenario: ScenarioId, metric: string, unit: string, better: Figure["better"], system: QueueSystem, samples: number[], extra: Partial<Figure> = {}): Figure {
  return { scenario, metric, unit, better, system: system.id, value: samples.length ? median(samples) : null, samples, ...extra };
}

async function repeat(ctx: Ctx, fn: (round: number) => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let r = 0; r < ctx.sizes.repeats; r++) out.push(await fn(r));
  return out;
}

/** S1: one enqueue at a time, each awaited (commit) before the next. Workers are not running. */
export async function s1(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  let capped = false;
  const samples = await repeat(ctx, () =>
    withSystem(system, base(1), async (h) => {
      const n = ctx.sizes.s1;
      const end = performance.now() + ctx.sizes.capSeconds * 1_000;
      const t0 = performance.now();
      let i = 0;
      for (; i < n && performance.now() < end; i++) {
        await h.add({ n: i });
        if (i % 100 === 0) ctx.progress.tick(`${i} / ${n}`);
      }
      capped ||= i < n;
      return i / ((performance.now() - t0) / 1_000);
    }),
  );
  return [figure("S1", "enqueue, one at a time", "jobs/s", "higher", system, samples, capped ? { note: `capped at ${ctx.sizes.capSeconds} s` } : {})];
}

/** S2: batches of 1 000, one after another (stops at the cap). */
export async function s2(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const all = jobs(ctx.sizes.s2);
  let capped = false;
  const samples = await repeat(ctx, () =>
    withSystem(system, base(1), async (h) => {
      const end = performance.now() + ctx.sizes.capSeconds * 1_000;
      const t0 = performance.now();
      let done = 0;
      for (let i = 0; i < all.length && performance.now() < end; i += BATCH) {
        const batch = all.slice(i, i + BATCH);
        await h.addBulk(batch);
        done += batch.length;
        ctx.progress.tick(`${done} / ${all.length}`);
      }
      capped ||= done < all.length;
      return done / ((performance.now() - t0) / 1_000);
    }),
  );
  return [figure("S2", "enqueue, batches of 1 000", "jobs/s", "higher", system, samples, capped ? { note: `capped at ${ctx.sizes.capSeconds} s` } : {})];
}

interface Drain {
  rate: number;
  capped: boolean;
}

/**
 * Preloads `all` (untimed), starts the workers and times first handler start
 * to the moment the store reports every job settled, or to the cap (then the
 * rate is handlers run per second so far).
 */
async function drain(system: QueueSystem, ctx: Ctx, all: JobSpec[], options: Omit<QueueOptions, "handler">, onCall?: (c: HandlerCall) => void): Promise<Drain> {
  let done = 0;
  let t0 = 0;
  const finished = signalled();
  const handler = (c: HandlerCall): void => {
    if (done === 0) t0 = performance.now();
    onCall?.(c);
    if (++done === all.length) finished.resolve();
  };
  return withSystem(system, { ...options, handler }, async (h) => {
    await inBatches(all, (b) => (h.preload ?? h.addBulk).call(h, b), (d) => ctx.progress.tick(`preload ${d} / ${all.length}`));
    const ticker = setInterval(() => ctx.progress.tick(`${done} / ${all.length}`), 250);
    try {
      const startedAt = performance.now();
      await h.start();
      const capMs = ctx.sizes.capSeconds * 1_000;
      const capped = (await Promise.race([finished.promise.then(() => false), sleep(capMs).then(() => true)])) && done < all.length;
      if (capped) return { rate: t0 === 0 ? 0 : done / ((performance.now() - t0) / 1_000), capped };
      // Every handler ran: the clock stops when the store has them all settled (completion batches included).
      const settled = await until(async () => (await h.remaining()) === 0, Math.max(1_000, capMs - (performance.now() - startedAt)), 10);
      return { rate: all.length / ((performance.now() - t0) / 1_000), capped: !settled };
    } finally {
      clearInterval(ticker);
    }
  });
}

/** S3: drain a preloaded backlog of no-op jobs at concurrency 1 and 32. */
export async function s3(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const all = jobs(ctx.sizes.s3);
  const out: Figure[] = [];
  for (const concurrency of [1, 32]) {
    let capped = false;
    const samples = await repeat(ctx, async () => {
      const r = await drain(system, ctx, all, { concurrency, retries: 3, keyed: false });
      capped ||= r.capped;
      return r.rate;
    });
    out.push(figure("S3", `drain, concurrency ${concurrency}`, "jobs/s", "higher", system, samples, capped ? { note: `capped at ${ctx.sizes.capSeconds} s before ${all.length} jobs` } : {}));
  }
  return out;
}

/** S4: enqueue → handler start, one job at a time on an idle system (concurrency 32 config). */
export async function s4(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const p50s: number[] = [];
  const p99s: number[] = [];
  let n = 0;
  for (let r = 0; r < ctx.sizes.repeats; r++) {
    let started: ((at: number) => void) | undefined;
    const samples = await withSystem(system, base(32, () => started?.(performance.now())), async (h) => {
      await h.start();
      await sleep(200); // let workers settle into their idle wait
      const got: number[] = [];
      const end = performance.now() + ctx.sizes.latencyCapSeconds * 1_000;
      for (let i = 0; i < ctx.sizes.s4 && performance.now() < end; i++) {
        const s = signalled<number>();
        started = s.resolve;
        const t0 = performance.now();
        await h.add({ n: i });
        got.push((await s.promise) - t0);
        if (i % 20 === 0) ctx.progress.tick(`${i} / ${ctx.sizes.s4}`);
      }
      return got.sort((a, b) => a - b);
    });
    n += samples.length;
    p50s.push(percentile(samples, 50));
    p99s.push(percentile(samples, 99));
  }
  const note = n < ctx.sizes.s4 * ctx.sizes.repeats ? `${n} samples in ${ctx.sizes.repeats} × ${ctx.sizes.latencyCapSeconds} s (time cap)` : `${n} samples`;
  return [
    figure("S4", "latency p50", "ms", "lower", system, p50s, { note }),
    figure("S4", "latency p99", "ms", "lower", system, p99s, { note }),
  ];
}

/** S5: keys × jobs per key, FIFO within a key; every handler call checks its key's order. */
export async function s5(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const all = keyedJobs(ctx.sizes.s5Keys, ctx.sizes.s5PerKey);
  let violations = 0;
  let capped = false;
  const samples = await repeat(ctx, async () => {
    const last = new Map<string, number>();
    const r = await drain(system, ctx, all, { concurrency: 32, retries: 3, keyed: true }, (c) => {
      const prev = last.get(c.key!) ?? -1;
      if (c.j !== prev + 1) violations++;
      last.set(c.key!, c.j);
    });
    capped ||= r.capped;
    return r.rate;
  });
  const note = `${ctx.sizes.s5Keys} keys × ${ctx.sizes.s5PerKey}; order violations: ${violations}${capped ? `; capped at ${ctx.sizes.capSeconds} s` : ""}`;
  return [figure("S5", "keyed drain, concurrency 32", "jobs/s", "higher", system, samples, { note, checks: { orderViolations: violations } })];
}

/** S6: every 10th job always fails; retries then dead letter. Timed to the last dead letter. */
export async function s6(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const n = ctx.sizes.s6;
  const retries = ctx.sizes.s6Retries;
  const failing = Math.ceil(n / 10);
  const expectedCalls = n - failing + failing * (retries + 1);
  const checks: Record<string, number | string | boolean> = {};
  const samples = await repeat(ctx, async () => {
    const calls = new Map<number, number>();
    let total = 0;
    let t0 = 0;
    const handler = (c: HandlerCall): void => {
      if (total++ === 0) t0 = performance.now();
      calls.set(c.n, (calls.get(c.n) ?? 0) + 1);
      if (c.n % 10 === 0) throw new Error(`bench: job ${c.n} fails on purpose`);
    };
    return withSystem(system, { concurrency: 32, retries, keyed: false, expectFailures: true, handler }, async (h) => {
      await inBatches(jobs(n), (b) => (h.preload ?? h.addBulk).call(h, b));
      await h.start();
      const limit = Math.max(ctx.sizes.capSeconds, 60) * 1_000;
      let dead = 0;
      const ok = await until(async () => {
        ctx.progress.tick(`${total} / ${expectedCalls} calls, ${dead} dead`);
        if (total < expectedCalls) return false;
        dead = await h.deadCount();
        return dead >= failing;
      }, limit, 50);
      const seconds = (performance.now() - t0) / 1_000;
      await sleep(200); // late duplicate attempts would show up here
      let wrong = 0;
      for (let i = 0; i < n; i++) if ((calls.get(i) ?? 0) !== (i % 10 === 0 ? retries + 1 : 1)) wrong++;
      Object.assign(checks, { handlerCalls: total, expectedCalls, deadLetters: dead, expectedDead: failing, jobsWithWrongAttemptCount: wrong, finished: ok });
      return ok ? seconds : NaN;
    });
  });
  const good = samples.filter((s) => !Number.isNaN(s));
  const note = `${n} jobs, ${failing} always fail, retries ${retries}; calls ${checks.handlerCalls}/${expectedCalls}, dead ${checks.deadLetters}/${failing}, wrong attempt counts ${checks.jobsWithWrongAttemptCount}`;
  return [figure("S6", "time to settle all (retry → dead letter)", "s", "lower", system, good, { note, checks })];
}
