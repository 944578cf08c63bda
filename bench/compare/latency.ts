/** S4: enqueue → handler start latency. */
import { percentile, signalled, sleep } from "./env.ts";
import { base, figure, withSystem, type Ctx } from "./scenario-kit.ts";
import type { Figure, QueueSystem } from "./types.ts";

/** S4: enqueue → handler start, one job at a time on an idle system (concurrency 32 config). */
export async function s4(system: QueueSystem, ctx: Ctx): Promise<Figure[]> {
  const p50s: number[] = [];
  const p99s: number[] = [];
  let n = 0;
  for (let r = 0; r < ctx.sizes.repeats; r++) {
    let started: ((at: number) => void) | undefined;
    const samples = await withSystem(
      system,
      base(32, () => started?.(performance.now())),
      async (h) => {
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
      },
    );
    n += samples.length;
    p50s.push(percentile(samples, 50));
    p99s.push(percentile(samples, 99));
  }
  const note =
    n < ctx.sizes.s4 * ctx.sizes.repeats
      ? `${n} samples in ${ctx.sizes.repeats} × ${ctx.sizes.latencyCapSeconds} s (time cap)`
      : `${n} samples`;
  return [
    figure("S4", "latency p50", "ms", "lower", system, p50s, { note }),
    figure("S4", "latency p99", "ms", "lower", system, p99s, { note }),
  ];
}
