/** S3 and S5: draining a preloaded backlog, unkeyed and per-key FIFO. */
import { signalled, sleep, until } from "./env.ts";
import { pgbossLostCompletions } from "./pgboss.ts";
import {
  figure,
  inBatches,
  JobTally,
  jobs,
  keyedJobs,
  repeat,
  withSystem,
  type Ctx,
} from "./scenario-kit.ts";
import type { Figure, HandlerCall, JobSpec, QueueOptions, QueueSystem } from "./types.ts";

export interface Drain {
  rate: number;
  capped: boolean;
  /** Distinct jobs handled and seconds from the first start (rate = ran / seconds). */
  ran: number;
  seconds: number;
  /** Handler calls for a job already handled (redeliveries); never counted as progress. */
  duplicates: number;
}

/**
 * Preloads `all` (untimed), starts the workers and times first handler start
 * to the moment the store reports every job settled, or to the cap (then the
 * rate is distinct jobs handled per second so far). A job handled twice counts
 * once: a redelivery is not progress (it is reported as a duplicate).
 */
export async function drain(
  system: QueueSystem,
  ctx: Ctx,
  all: JobSpec[],
  options: Omit<QueueOptions, "handler">,
  onCall?: (c: HandlerCall) => void,
  /** Called after the preload, before the workers start, and once the drain is over (bench/s5-ab.ts: CPU). */
  around?: { before(): Promise<void>; after(): Promise<void> },
): Promise<Drain> {
  const tally = new JobTally(all.length);
  let t0 = 0;
  const finished = signalled();
  const handler = (c: HandlerCall): void => {
    if (t0 === 0) t0 = performance.now();
    onCall?.(c);
    if (tally.add(c.n) && tally.distinct === all.length) finished.resolve();
  };
  const result = (r: Omit<Drain, "duplicates">): Drain => ({ ...r, duplicates: tally.duplicates });
  return withSystem(system, { ...options, handler }, async (h) => {
    await inBatches(
      all,
      (b) => (h.preload ?? h.addBulk).call(h, b),
      (d) => ctx.progress.tick(`preload ${d} / ${all.length}`),
    );
    const ticker = setInterval(
      () => ctx.progress.tick(`${tally.distinct} / ${all.length}${tally.note()}`),
      250,
    );
    try {
      await around?.before();
      const startedAt = performance.now();
      await h.start();
      const capMs = ctx.sizes.capSeconds * 1_000;
      const capped =
        (await Promise.race([finished.promise.then(() => false), sleep(capMs).then(() => true)])) &&
        tally.distinct < all.length;
      if (capped) {
        const seconds = t0 === 0 ? 0 : (performance.now() - t0) / 1_000;
        const ran = tally.distinct;
        await around?.after();
        return result({ rate: seconds === 0 ? 0 : ran / seconds, capped, ran, seconds });
      }
      // Every handler ran: the clock stops when the store has them all settled (completion batches included).
      const settled = await until(
        async () => (await h.remaining()) === 0,
        Math.max(1_000, capMs - (performance.now() - startedAt)),
        10,
      );
      const seconds = (performance.now() - t0) / 1_000;
      await around?.after();
      return result({ rate: all.length / seconds, capped: !settled, ran: all.length, seconds });
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
    let duplicates = 0;
    const samples = await repeat(ctx, async () => {
      const r = await drain(system, ctx, all, { concurrency, retries: 3, keyed: false });
      capped ||= r.capped;
      duplicates += r.duplicates;
      return r.rate;
    });
    const notes = [
      capped ? `capped at ${ctx.sizes.capSeconds} s before ${all.length} jobs` : "",
      duplicates > 0 ? `${duplicates} duplicate handler call(s) (not counted as jobs)` : "",
    ].filter(Boolean);
    out.push(
      figure("S3", `drain, concurrency ${concurrency}`, "jobs/s", "higher", system, samples, {
        ...(notes.length > 0 ? { note: notes.join("; ") } : {}),
        ...(duplicates > 0 ? { checks: { duplicates } } : {}),
      }),
    );
  }
  return out;
}

/** S5: keys × jobs per key, FIFO within a key; every handler call checks its key's order. */
export async function s5(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const lost = (): number => (system.id === "pg-boss" ? pgbossLostCompletions() : 0);
  const all = keyedJobs(ctx.sizes.s5Keys, ctx.sizes.s5PerKey);
  let violations = 0;
  let capped = false;
  let duplicates = 0;
  const drains = Math.max(1, ctx.sizes.s5Drains);
  const samples = await repeat(ctx, async () => {
    // Several drains pooled: jobs run ÷ time taken over all of them (see Sizes.s5Drains).
    let ran = 0;
    let seconds = 0;
    for (let d = 0; d < drains; d++) {
      const last = new Map<string, number>();
      const r = await drain(system, ctx, all, { concurrency: 32, retries: 3, keyed: true }, (c) => {
        const prev = last.get(c.key!) ?? -1;
        if (c.j !== prev + 1) violations++;
        last.set(c.key!, c.j);
      });
      capped ||= r.capped;
      duplicates += r.duplicates;
      ran += r.ran;
      seconds += r.seconds;
    }
    return seconds === 0 ? 0 : ran / seconds;
  });
  const note = `${ctx.sizes.s5Keys} keys × ${ctx.sizes.s5PerKey}${drains > 1 ? `, ${drains} drains pooled per sample` : ""}; order violations: ${violations}${duplicates > 0 ? `; ${duplicates} duplicate handler call(s) (not counted as jobs)` : ""}${capped ? `; capped at ${ctx.sizes.capSeconds} s` : ""}${lost() > 0 ? `; ${lost()} completion(s) lost to pg-boss deadlocks (pgboss.ts)` : ""}`;
  return [
    figure("S5", "keyed drain, concurrency 32", "jobs/s", "higher", system, samples, {
      note,
      checks: { orderViolations: violations, ...(duplicates > 0 ? { duplicates } : {}) },
    }),
  ];
}
