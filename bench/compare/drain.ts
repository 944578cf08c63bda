/** S3 and S5: draining a preloaded backlog, unkeyed and per-key FIFO. */
import { signalled, sleep, until } from "./env.ts";
import { figure, inBatches, jobs, keyedJobs, repeat, withSystem, type Ctx } from "./scenario-kit.ts";
import type { Figure, HandlerCall, JobSpec, QueueOptions, QueueSystem } from "./types.ts";

export interface Drain {
  rate: number;
  capped: boolean;
  /** Handlers run and seconds from the first start (rate = ran / seconds). */
  ran: number;
  seconds: number;
}

/**
 * Preloads `all` (untimed), starts the workers and times first handler start
 * to the moment the store reports every job settled, or to the cap (then the
 * rate is handlers run per second so far).
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
  let done = 0;
  let t0 = 0;
  const finished = signalled();
  const handler = (c: HandlerCall): void => {
    if (done === 0) t0 = performance.now();
    onCall?.(c);
    if (++done === all.length) finished.resolve();
  };
  return withSystem(system, { ...options, handler }, async (h) => {
    await inBatches(
      all,
      (b) => (h.preload ?? h.addBulk).call(h, b),
      (d) => ctx.progress.tick(`preload ${d} / ${all.length}`),
    );
    const ticker = setInterval(() => ctx.progress.tick(`${done} / ${all.length}`), 250);
    try {
      await around?.before();
      const startedAt = performance.now();
      await h.start();
      const capMs = ctx.sizes.capSeconds * 1_000;
      const capped =
        (await Promise.race([finished.promise.then(() => false), sleep(capMs).then(() => true)])) &&
        done < all.length;
      if (capped) {
        const seconds = t0 === 0 ? 0 : (performance.now() - t0) / 1_000;
        await around?.after();
        return { rate: seconds === 0 ? 0 : done / seconds, capped, ran: done, seconds };
      }
      // Every handler ran: the clock stops when the store has them all settled (completion batches included).
      const settled = await until(
        async () => (await h.remaining()) === 0,
        Math.max(1_000, capMs - (performance.now() - startedAt)),
        10,
      );
      const seconds = (performance.now() - t0) / 1_000;
      await around?.after();
      return { rate: all.length / seconds, capped: !settled, ran: all.length, seconds };
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
    out.push(
      figure(
        "S3",
        `drain, concurrency ${concurrency}`,
        "jobs/s",
        "higher",
        system,
        samples,
        capped ? { note: `capped at ${ctx.sizes.capSeconds} s before ${all.length} jobs` } : {},
      ),
    );
  }
  return out;
}

/** S5: keys × jobs per key, FIFO within a key; every handler call checks its key's order. */
export async function s5(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const all = keyedJobs(ctx.sizes.s5Keys, ctx.sizes.s5PerKey);
  let violations = 0;
  let capped = false;
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
      ran += r.ran;
      seconds += r.seconds;
    }
    return seconds === 0 ? 0 : ran / seconds;
  });
  const note = `${ctx.sizes.s5Keys} keys × ${ctx.sizes.s5PerKey}${drains > 1 ? `, ${drains} drains pooled per sample` : ""}; order violations: ${violations}${capped ? `; capped at ${ctx.sizes.capSeconds} s` : ""}`;
  return [
    figure("S5", "keyed drain, concurrency 32", "jobs/s", "higher", system, samples, {
      note,
      checks: { orderViolations: violations },
    }),
  ];
}
