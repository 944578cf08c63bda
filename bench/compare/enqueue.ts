/** S1 and S2: enqueue throughput, one at a time and in batches of 1 000. */
import { BATCH, base, figure, jobs, repeat, withSystem, type Ctx } from "./scenario-kit.ts";
import type { Figure, QueueSystem } from "./types.ts";

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
  return [
    figure(
      "S1",
      "enqueue, one at a time",
      "jobs/s",
      "higher",
      system,
      samples,
      capped ? { note: `capped at ${ctx.sizes.capSeconds} s` } : {},
    ),
  ];
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
  return [
    figure(
      "S2",
      "enqueue, batches of 1 000",
      "jobs/s",
      "higher",
      system,
      samples,
      capped ? { note: `capped at ${ctx.sizes.capSeconds} s` } : {},
    ),
  ];
}
