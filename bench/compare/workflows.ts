/**
 * S9: durable workflows. (a) 3-step workflows per second, run in-process one
 * at a time and 32 at a time; (b) the wake delay of a 1 s durable sleep —
 * how long after its due time the workflow continues — p50 / p99 over
 * sleeps started 20 ms apart (several parked at once).
 */
import { median, percentile, sleep } from "./env.ts";
import type { Progress } from "./progress.ts";
import type { Figure, Sizes, WorkflowSystem } from "./types.ts";

const SLEEP_MS = 1_000;

export async function s9(
  system: WorkflowSystem,
  ctx: { sizes: Sizes; progress: Progress },
): Promise<Figure[]> {
  const rates: Record<1 | 32, number[]> = { 1: [], 32: [] };
  const p50: number[] = [];
  const p99: number[] = [];
  let capped = false;
  let nextId = 0;
  for (let r = 0; r < ctx.sizes.repeats; r++) {
    const h = await system.open();
    try {
      for (const concurrency of [1, 32] as const) {
        const n = ctx.sizes.s9;
        const end = performance.now() + ctx.sizes.capSeconds * 1_000;
        let done = 0;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (done < n && performance.now() < end) {
              done++;
              await h.runThreeSteps(nextId++);
              if (done % 50 === 0) ctx.progress.tick(`c${concurrency} ${done} / ${n}`);
            }
          }),
        );
        capped ||= done < n;
        rates[concurrency].push(done / ((performance.now() - t0) / 1_000));
      }
      const delays: number[] = [];
      await Promise.all(
        Array.from({ length: ctx.sizes.s9Sleeps }, async (_, k) => {
          await sleep(k * 20);
          delays.push(await h.sleepOnce(nextId++, SLEEP_MS));
          ctx.progress.tick(`sleeps ${delays.length} / ${ctx.sizes.s9Sleeps}`);
        }),
      );
      delays.sort((a, b) => a - b);
      p50.push(percentile(delays, 50));
      p99.push(percentile(delays, 99));
    } finally {
      await h.close();
    }
  }
  const fig = (
    metric: string,
    unit: string,
    better: Figure["better"],
    samples: number[],
    note?: string,
  ): Figure => ({
    scenario: "S9",
    metric,
    unit,
    better,
    system: system.id,
    value: samples.length ? median(samples) : null,
    samples,
    ...(note ? { note } : {}),
  });
  const capNote = capped ? `capped at ${ctx.sizes.capSeconds} s` : undefined;
  return [
    fig("3-step workflows, 1 at a time", "wf/s", "higher", rates[1], capNote),
    fig("3-step workflows, 32 at a time", "wf/s", "higher", rates[32], capNote),
    fig("1 s sleep wake delay p50", "ms", "lower", p50, `${ctx.sizes.s9Sleeps} sleeps per run`),
    fig("1 s sleep wake delay p99", "ms", "lower", p99, `${ctx.sizes.s9Sleeps} sleeps per run`),
  ];
}
