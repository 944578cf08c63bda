// A run a graceful stop leaves at its deadline is taken over after its lease with no recovery, on every driver; a lapsed holder's takeover is counted and logged (the store's side: src/store/conformance/stop-lease-cases.ts).
import { describe, expect, it } from "vitest";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { DurableRuntime } from "../../src/durable/durable-runtime.ts";
import { flow, type AnyFlow } from "../../src/flow/flow.ts";
import type { Store } from "../../src/store/types.ts";
import { gate, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const LEASE_MS = 60_000;
const FLOW = "stoplease.work";

describe.each(drivers)("a graceful stop's runs on the $name driver", (driver) => {
  /**
   * A runtime on `store` whose flow runs one step: held at `hold` while `held` (the first instance's
   * long step), immediate otherwise. Its time is its own time travel (no renewal fires unless moved).
   */
  function instance(store: Store, id: string, at: number, hold?: Promise<void>) {
    const { logger, records } = recordingLogger();
    const clock = createTimeTravel(at);
    const steps: string[] = [];
    const entered = gate();
    const f: AnyFlow = flow(FLOW, { durable: true, do: () => undefined });
    const rt = new DurableRuntime({
      store,
      clock,
      logger,
      instanceId: id,
      leaseMs: LEASE_MS,
      concurrency: 4,
      maxRecoveries: 10,
      flows: new Map([[FLOW, f]]),
      execute: async (_flow, _input, frame) => {
        const { value } = await frame.session.step("long", async () => {
          steps.push(id);
          entered.open();
          if (hold !== undefined) await hold;
          return "done";
        });
        return value;
      },
    });
    return { rt, f, records, steps, entered: entered.promise };
  }

  /** A fresh store, opened, and its cleanup. */
  async function storeOf(): Promise<{ store: Store; cleanup(): Promise<void> }> {
    const made = await driver.make();
    await made.store.open();
    return made;
  }

  it("left at the stop deadline with its step running: another instance takes it only after the lease lapses, completes it, recoveries 0, nothing logged as a takeover", async () => {
    const made = await storeOf();
    const store = made.store;
    const hold = gate();
    const a = instance(store, "a", T0, hold.promise);
    const b = instance(store, "b", T0 + LEASE_MS - 1);
    const run = a.rt.start(a.f, {}, null, "r1").catch((e: unknown) => e);
    try {
      await a.entered;
      await a.rt.stop(20);
      expect(a.rt.runningIds()).toEqual(["r1"]);
      expect(await store.getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: "a/1#stopped",
        leaseExpiresAt: T0 + LEASE_MS,
        recoveries: 0,
      });
      // Before the lapse: neither a boot's orphan scan nor a scheduler's claim takes it.
      await b.rt.orphanScan();
      b.rt.startScheduler();
      await b.rt.whenIdle();
      expect(b.steps).toEqual([]);
      await b.rt.stop(0);
      // After the lapse: another instance's scheduler claims it and completes it, no recovery counted or logged.
      const c = instance(store, "c", T0 + LEASE_MS);
      c.rt.startScheduler();
      await until(async () => (await store.getRun("r1"))?.status === "completed", "r1 completed");
      await c.rt.stop(5_000);
      expect(await store.getRun("r1")).toMatchObject({ status: "completed", output: "done", recoveries: 0 });
      expect(c.steps).toEqual(["c"]);
      expect(c.records.filter((r) => String(r.msg).includes("taken over"))).toEqual([]);
    } finally {
      hold.open();
      await run;
      await made.cleanup();
    }
  });

  it("the attempt a stop left goes on under the lease's new name until its process exits: its step is journaled and the run completes", async () => {
    const made = await storeOf();
    const store = made.store;
    const hold = gate();
    const a = instance(store, "a", T0, hold.promise);
    try {
      const run = a.rt.start(a.f, {}, null, "r1");
      await a.entered;
      await a.rt.stop(20);
      hold.open();
      expect(await run).toEqual({ kind: "returned", value: "done" });
      expect(await store.getRun("r1")).toMatchObject({ status: "completed", recoveries: 0 });
      expect((await store.getJournal("r1")).map((e) => e.kind)).toEqual(["step"]);
    } finally {
      hold.open();
      await made.cleanup();
    }
  });

  it("a holder that never stopped (it died): the takeover counts one recovery and logs it at info with the run, flow, previous holder, count and bound", async () => {
    const made = await storeOf();
    const store = made.store;
    const hold = gate();
    const a = instance(store, "a", T0, hold.promise);
    const run = a.rt.start(a.f, {}, null, "r1").catch((e: unknown) => e);
    try {
      await a.entered;
      const c = instance(store, "c", T0 + LEASE_MS);
      await c.rt.orphanScan();
      await until(async () => (await store.getRun("r1"))?.status === "completed", "r1 completed");
      await c.rt.stop(5_000);
      expect(await store.getRun("r1")).toMatchObject({ status: "completed", recoveries: 1 });
      const lines = c.records.filter((r) => String(r.msg).includes("taken over"));
      expect(lines).toEqual([
        expect.objectContaining({
          level: 30,
          runId: "r1",
          flow: FLOW,
          previousHolder: "a/1",
          recoveries: 1,
          maxRecoveries: 10,
          msg: `durable run "r1" (${FLOW}) taken over from a/1, whose lease lapsed: recovery 1 of at most 10 (durable.maxRecoveries)`,
        }),
      ]);
    } finally {
      hold.open();
      await run;
      await made.cleanup();
    }
  });
});
