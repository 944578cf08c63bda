/**
 * okengine's side of S9: durable flows run in-process with `app.invoke` — a
 * 3-step flow (each `fx.step` journaled) and a flow that sleeps 1 s with
 * `fx.clock.sleep` (the run parks, the wake scheduler resumes it on a timer).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchLogger } from "./logger.ts";
import { createApp, flow, type Duration, type JournalDriverName } from "../../src/index.ts";
import { dropSchema, randomName, signalled } from "./env.ts";
import { okengineConfig } from "./okengine.ts";
import type { WorkflowSystem } from "./types.ts";

export function okengineWorkflows(driver: JournalDriverName): WorkflowSystem {
  return {
    id: `okengine-${driver}`,
    label: `okengine (${driver})`,
    describe: () => [
      `flow({ durable: true }) run with app.invoke(flow, input) on the ${driver} driver; 3 fx.step calls; fx.clock.sleep("nap", "1s")`,
      "durable.leaseMs 30 000 (default), pool 10",
    ],
    async open() {
      const ns =
        driver === "postgres"
          ? randomName("oke_bench")
          : driver === "file"
            ? await mkdtemp(join(tmpdir(), "oke_bench_"))
            : "memory";
      const sleptAt = new Map<number, number>();
      const waiters = new Map<number, (delay: number) => void>();
      const three = flow<{ i: number }, number>("bench.three", {
        durable: true,
        do: async ({ i }, fx) => {
          const a = await fx.step("a", () => i + 1);
          const b = await fx.step("b", () => a * 2);
          return fx.step("c", () => b + 1);
        },
      });
      const sleeper = flow<{ i: number; ms: number }, void>("bench.sleep", {
        durable: true,
        do: async ({ i, ms }, fx) => {
          // Code before a sleep runs again on resume: only the first pass stamps the start.
          if (!sleptAt.has(i)) sleptAt.set(i, performance.now());
          // ms is a whole number of milliseconds: the cast the Duration type asks of a computed one.
          await fx.clock.sleep("nap", `${ms}ms` as Duration);
          waiters.get(i)?.(performance.now() - sleptAt.get(i)! - ms);
        },
      });
      const app = createApp({
        modules: [{ exports: { three, sleeper } }],
        env: "prod",
        config: okengineConfig(driver, { name: ns }, { concurrency: 32 }),
        logger: benchLogger(),
        root: tmpdir(),
      });
      await app.boot();
      return {
        runThreeSteps: async (i) => {
          await app.invoke(three, { i });
        },
        sleepOnce: async (i, ms) => {
          const woke = signalled<number>();
          waiters.set(i, woke.resolve);
          await app.invoke(sleeper, { i, ms });
          return woke.promise;
        },
        close: async () => {
          await app.stop({ timeoutMs: 5_000 });
          if (driver === "postgres") await dropSchema(ns);
          if (driver === "file") await rm(ns, { recursive: true, force: true });
        },
      };
    },
  };
}
