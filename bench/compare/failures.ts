/** S6: failing jobs — retries, then dead letter, with every attempt counted. */
import { sleep, until } from "./env.ts";
import { figure, inBatches, jobs, repeat, withSystem, type Ctx } from "./scenario-kit.ts";
import type { Figure, HandlerCall, QueueSystem } from "./types.ts";

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
    return withSystem(
      system,
      { concurrency: 32, retries, keyed: false, expectFailures: true, handler },
      async (h) => {
        await inBatches(jobs(n), (b) => (h.preload ?? h.addBulk).call(h, b));
        await h.start();
        const limit = Math.max(ctx.sizes.capSeconds, 60) * 1_000;
        let dead = 0;
        const ok = await until(
          async () => {
            ctx.progress.tick(`${total} / ${expectedCalls} calls, ${dead} dead`);
            if (total < expectedCalls) return false;
            dead = await h.deadCount();
            return dead >= failing;
          },
          limit,
          50,
        );
        const seconds = (performance.now() - t0) / 1_000;
        await sleep(200); // late duplicate attempts would show up here
        let wrong = 0;
        for (let i = 0; i < n; i++) if ((calls.get(i) ?? 0) !== (i % 10 === 0 ? retries + 1 : 1)) wrong++;
        Object.assign(checks, {
          handlerCalls: total,
          expectedCalls,
          deadLetters: dead,
          expectedDead: failing,
          jobsWithWrongAttemptCount: wrong,
          finished: ok,
        });
        return ok ? seconds : NaN;
      },
    );
  });
  const good = samples.filter((s) => !Number.isNaN(s));
  const note = `${n} jobs, ${failing} always fail, retries ${retries}; calls ${checks.handlerCalls}/${expectedCalls}, dead ${checks.deadLetters}/${failing}, wrong attempt counts ${checks.jobsWithWrongAttemptCount}`;
  return [
    figure("S6", "time to settle all (retry → dead letter)", "s", "lower", system, good, { note, checks }),
  ];
}
