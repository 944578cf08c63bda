// Host clock steps on the memory and file drivers: in-flight work is not run again, leases, wakes and fires are not delayed, stop keeps its deadline.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { gate } from "../../test/conformance/app-fixture.ts";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import type { OkeConfig } from "./config.ts";
import { createApp, every, flow, on, signal } from "../index.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";

/** A host clock step as NTP makes it: 40 s, either way. */
const STEP_MS = 40_000;
/** Long enough for a loaded machine to do what takes milliseconds, short of the step it must not wait for. */
const PROMPTLY_MS = 15_000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  while (cleanups.length > 0) await cleanups.pop()!();
});

const drivers: Array<{ name: string; make: () => Store }> = [
  { name: "memory", make: () => createMemoryStore() },
  {
    name: "file",
    make: () => {
      const dir = mkdtempSync(join(tmpdir(), "oke-step-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      return createFileStore({ dir });
    },
  },
];

/** An app with the process clock (no clock passed), stopped after the test; the store is the app's to close. */
async function boot(store: Store, modules: Record<string, unknown>, config: OkeConfig = {}) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "info" },
    { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) },
  );
  const app = createApp({ modules: [modules], env: "test", store, logger, config });
  cleanups.push(async () => {
    await app.stop({ timeoutMs: 1_000 });
    await store.close();
  });
  await app.boot();
  return { app, msgs: () => lines.map((l) => String(l.msg)) };
}

describe.each(drivers)("host clock steps on the $name driver", ({ make }) => {
  it("+40 s: a handler in flight is not claimed again; it runs once", async () => {
    const clock = hostClockSteps();
    const jobs = signal.once<{ n: number }>("step.jobs");
    const attempts: Array<[number, number]> = [];
    const firstStarted = gate();
    const secondStarted = gate();
    const hold = gate();
    const worker = on(
      jobs,
      flow("step.worker", {
        do: async ({ n }: { n: number }, fx) => {
          attempts.push([n, fx.attempt]);
          if (n === 2) secondStarted.open();
          if (n !== 1) return;
          firstStarted.open();
          await hold.promise;
        },
      }),
    );
    // Claim at emit off: the second emit goes through a claim, which reclaims every lease it sees expired.
    const { app } = await boot(
      make(),
      { jobs, worker },
      { signals: { leaseMs: 30_000, claimAtEmit: false } },
    );
    await app.emit(jobs, { n: 1 });
    await within(firstStarted.promise, PROMPTLY_MS, "the first handler");
    clock.step(STEP_MS);
    // On the host clock the first lease ran out 10 s ago: the claim for n = 2 would take n = 1 again.
    await app.emit(jobs, { n: 2 });
    await within(secondStarted.promise, PROMPTLY_MS, "the second handler");
    hold.open();
    await app.idle();
    expect(attempts).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it("+40 s: a durable run in a step is not taken over by the wake scheduler; the step runs once", async () => {
    const clock = hostClockSteps();
    let bodies = 0;
    const inStep = gate();
    const hold = gate();
    const work = flow("step.work", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("slow", async () => {
          // Only the first body waits: a second one (a takeover) returns, so its run ends and is seen.
          if (++bodies > 1) return;
          inStep.open();
          await hold.promise;
        });
      },
    });
    const nap = flow("step.nap", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("nap", "1h");
      },
    });
    const { app } = await boot(make(), { work, nap }, { durable: { leaseMs: 30_000 } });
    const running = app.invoke(work, {});
    await within(inStep.promise, PROMPTLY_MS, "the step");
    clock.step(STEP_MS);
    // A park is a store event: the scheduler reads the next deadline, which on the host clock is
    // the running run's lease, 10 s past, and would claim the run and run its step again.
    // Parked: invoke resolves (undefined) once the park committed.
    expect(await app.invoke(nap, {})).toBeUndefined();
    await app.idle({ timeoutMs: PROMPTLY_MS });
    expect(bodies).toBe(1);
    hold.open();
    await running;
    expect(bodies).toBe(1);
  });

  it("-40 s: a hung handler's message is reclaimed once its lease runs out, not 40 s later", async () => {
    const clock = hostClockSteps();
    const jobs = signal.once("step.hang", { retries: 1 });
    const first = gate();
    const second = gate();
    const hold = gate();
    const worker = on(
      jobs,
      flow("step.hang", {
        do: async (_: unknown, fx) => {
          if (fx.attempt > 1) return second.open();
          first.open();
          await hold.promise;
        },
      }),
    );
    const { app } = await boot(make(), { jobs, worker }, { signals: { leaseMs: 500 } });
    cleanups.push(() => hold.open());
    await app.emit(jobs, {});
    await within(first.promise, PROMPTLY_MS, "the first attempt");
    clock.step(-STEP_MS);
    await within(second.promise, PROMPTLY_MS, "the second attempt, a lease (500 ms) later");
  });

  it("-40 s: a sleeping run wakes at its wake time, not 40 s later", async () => {
    const clock = hostClockSteps();
    const woke = gate();
    const nap = flow("step.sleeper", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("nap", "1s");
        await fx.step("after", () => woke.open());
      },
    });
    const { app } = await boot(make(), { nap });
    // Parked: invoke resolves (undefined) once the park committed.
    expect(await app.invoke(nap, {})).toBeUndefined();
    clock.step(-STEP_MS);
    await within(woke.promise, PROMPTLY_MS, "the wake, 1 s after the park");
  });

  it("-40 s: a clock's next slot fires on time, not 40 s later", async () => {
    const clock = hostClockSteps();
    const slots: number[] = [];
    let fired = gate<number>();
    const tick = on(
      every("1s"),
      flow("step.tick", {
        do: ({ scheduledAt }) => {
          slots.push(scheduledAt);
          fired.open(scheduledAt);
        },
      }),
    );
    await boot(make(), { tick });
    const first = await within(fired.promise, PROMPTLY_MS, "the first slot");
    fired = gate<number>();
    clock.step(-STEP_MS);
    const next = await within(fired.promise, PROMPTLY_MS, "the next slot, 1 s later");
    expect(next).toBeGreaterThan(first);
    expect(slots.length).toBeGreaterThanOrEqual(2);
  });
});

describe("host clock steps during app.stop()", () => {
  it("+40 s: the drain still waits for a handler within its deadline", async () => {
    const clock = hostClockSteps();
    const jobs = signal.once("stop.jobs");
    const started = gate();
    const hold = gate();
    let finished = false;
    const worker = on(
      jobs,
      flow("stop.worker", {
        do: async () => {
          started.open();
          await hold.promise;
          finished = true;
        },
      }),
    );
    const { app, msgs } = await boot(createMemoryStore(), { jobs, worker });
    await app.emit(jobs, {});
    await within(started.promise, PROMPTLY_MS, "the handler");
    const stopped = app.stop({ timeoutMs: 20_000 });
    clock.step(STEP_MS);
    // Ends well inside the deadline; a stop whose deadline moved with the host clock has given up on it.
    setTimeout(() => hold.open(), 300);
    await within(stopped, PROMPTLY_MS, "stop");
    expect(finished).toBe(true);
    expect(msgs().at(-1)).toBe("okengine stopped: nothing left running");
  });

  it("-40 s: a hung handler is left at the deadline, not 40 s later", async () => {
    const clock = hostClockSteps();
    const jobs = signal.once("stop.hung");
    const started = gate();
    const hold = gate();
    const worker = on(
      jobs,
      flow("stop.hung", {
        do: async () => {
          started.open();
          await hold.promise;
        },
      }),
    );
    const { app, msgs } = await boot(createMemoryStore(), { jobs, worker });
    cleanups.push(() => hold.open());
    await app.emit(jobs, {});
    await within(started.promise, PROMPTLY_MS, "the handler");
    const stopped = app.stop({ timeoutMs: 300 });
    clock.step(-STEP_MS);
    await within(stopped, PROMPTLY_MS, "stop, 300 ms after it began");
    expect(msgs().at(-1)).toMatch(/^okengine stopped: 1 message handler\(s\) were still running/);
  });
});
