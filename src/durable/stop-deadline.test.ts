// DurableRuntime.stop(): its deadline is a duration on the monotonic clock, so a host clock step while it stops does not move it.
import { afterEach, describe, expect, it, vi } from "vitest";
import { gate, recordingLogger } from "../../test/conformance/app-fixture.ts";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { flow } from "../flow/flow.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { DurableRuntime } from "./durable-runtime.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("DurableRuntime.stop and host clock steps", () => {
  it("a run that outlives the deadline is left at the deadline, whatever the host clock did meanwhile", async () => {
    const store = createMemoryStore();
    await store.open();
    const hung = flow("hung", { durable: true, do: () => undefined });
    const started = gate();
    const hold = gate();
    const rt = new DurableRuntime({
      store,
      // Time travel: no lease renewal fires, so only stop()'s own deadline is in play.
      clock: createTimeTravel(1_000_000),
      logger: recordingLogger().logger,
      instanceId: "i1",
      leaseMs: 30_000,
      concurrency: 4,
      flows: new Map([["hung", hung]]),
      execute: async () => {
        started.open();
        await hold.promise;
      },
    });
    const run = rt.start(hung, {}, null, "r1");
    try {
      await within(started.promise, 10_000, "the run");
      const clock = hostClockSteps();
      let reads = 0;
      // The host clock steps back 40 s right after stop() reads it: a deadline taken from
      // Date.now() would then lie 40 s further off.
      vi.mocked(Date.now).mockImplementation(() => clock.wall() - (reads++ === 0 ? 0 : 40_000));
      const stopped = rt.stop(300);
      await within(stopped, 15_000, "stop(300)");
      expect(rt.runningIds()).toEqual(["r1"]);
    } finally {
      hold.open();
      await run.catch(() => undefined);
      await store.close();
    }
  });
});
