// ScheduleRuntime.stop: no fire (and no reconcile) goes out after stop, and stop waits for the store call in flight.
import { afterEach, describe, expect, it } from "vitest";
import { gatedStore, until } from "../../test/conformance/app-fixture.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { ScheduleRuntime } from "./schedule-runtime.ts";
import { every } from "./schedule.ts";
import { createTimeTravel } from "./time-travel.ts";

const T0 = Date.parse("2026-05-01T10:00:00.500Z");

const runtime = (store: Store, time: ReturnType<typeof createTimeTravel>) =>
  new ScheduleRuntime({
    store,
    clock: time,
    logger: createLogger({ format: "silent" }),
    clocks: [{ name: "c.a", schedule: every("1s"), flow: "f.a" }],
  });

/** Lets timers made due and the checks they start run. */
const settle = async (rt: ScheduleRuntime): Promise<void> => {
  for (let i = 0; i < 10; i++) {
    await rt.whenIdle();
    await new Promise((r) => setImmediate(r));
  }
};

describe("ScheduleRuntime.stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  /** A runtime over a memory store whose `method` can be held at a gate. */
  async function setup(method: "reconcileSchedules" | "fireBatch") {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedStore(raw, method);
    const time = createTimeTravel(T0);
    return { raw, state, time, rt: runtime(store, time) };
  }

  it("a stop while start()'s reconcile awaits the store: stop waits for it, and no slot fires afterwards", async () => {
    const { raw, state, time, rt } = await setup("reconcileSchedules");
    state.gated = true;
    const starting = rt.start();
    await until(() => state.waiting === 1, "the reconcile at start");
    let stopped = false;
    const stopping = rt.stop().then(() => (stopped = true));
    // The app stopped during boot; the clock passes three slots meanwhile.
    time.advance("3s");
    await new Promise((r) => setImmediate(r));
    const stoppedBeforeTheReconcileAnswered = stopped;
    state.gate.open();
    await starting;
    await stopping;
    time.advance("5s");
    await settle(rt);

    expect(state.calls.get("fireBatch") ?? 0).toBe(0);
    expect((await raw.stats("clock:c.a", time.now())).pending).toBe(0);
    expect((await raw.listSchedules()).map((r) => r.lastSlot)).toEqual([null]);
    expect(stoppedBeforeTheReconcileAnswered).toBe(false);
  });

  it("start() after stop() (a boot that went on after the app stopped) sends nothing and fires nothing", async () => {
    const { raw, state, time, rt } = await setup("reconcileSchedules");
    await rt.stop();
    await rt.start();
    time.advance("5s");
    await settle(rt);

    expect(state.calls.get("reconcileSchedules") ?? 0).toBe(0);
    expect(state.calls.get("fireBatch") ?? 0).toBe(0);
    expect((await raw.stats("clock:c.a", time.now())).pending).toBe(0);
  });

  it("a fire out at stop commits once, stop waits for it, and no later slot fires", async () => {
    const { raw, state, time, rt } = await setup("fireBatch");
    await rt.start();
    await settle(rt);
    state.gated = true;
    time.advance("1s");
    await until(() => state.waiting === 1, "the fire of the 10:00:01 slot");
    let stopped = false;
    const stopping = rt.stop().then(() => (stopped = true));
    time.advance("3s");
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    state.gate.open();
    await stopping;
    time.advance("5s");
    await settle(rt);

    expect(state.calls.get("fireBatch")).toBe(1);
    expect((await raw.stats("clock:c.a", time.now())).pending).toBe(1);
    expect((await raw.listSchedules()).map((r) => r.lastSlot)).toEqual([Date.parse("2026-05-01T10:00:01Z")]);
  });
});
