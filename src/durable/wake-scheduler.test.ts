// WakeScheduler.stop: a claim round still awaiting the store when the app stops takes nothing afterwards.
import { afterEach, describe, expect, it } from "vitest";
import { gatedStore, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { AcquiredRun, Store } from "../store/types.ts";
import { Permits } from "./permits.ts";
import { WakeScheduler } from "./wake-scheduler.ts";

const T0 = 1_000_000;
const HOUR = 3_600_000;

/** Parks run `id` of flow "f" until `wakeAt` through the store's own API. */
async function parkRun(store: Store, id: string, now: number, wakeAt: number): Promise<void> {
  await store.startRun({
    id,
    flow: "f",
    input: {},
    parentRunId: null,
    owner: "parker",
    now,
    leaseMs: 30_000,
  });
  await store.park({
    runId: id,
    owner: "parker",
    now,
    entry: { runId: id, seq: 0, kind: "sleep", label: "nap", duration: "1h", wakeAt, at: now },
  });
}

/** A scheduler for flow "f" that records the runs it resumes instead of running them. */
function schedulerOver(store: Store, time: TimeTravel): { scheduler: WakeScheduler; resumed: AcquiredRun[] } {
  const resumed: AcquiredRun[] = [];
  const scheduler = new WakeScheduler({
    store,
    clock: time,
    logger: recordingLogger().logger,
    nextOwner: () => "s/1",
    leaseMs: 30_000,
    permits: new Permits(4),
    flows: ["f"],
    resume: async (run) => void resumed.push(run),
  });
  return { scheduler, resumed };
}

describe("WakeScheduler.stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  it("a round awaiting the store at stop claims nothing once time has moved past a wake time", async () => {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedStore(raw, "nextWakeAt");
    const time = createTimeTravel(T0);
    const { scheduler, resumed } = schedulerOver(store, time);
    scheduler.start();
    await scheduler.settled();

    // A park elsewhere is a store wake event: the scheduler re-reads the next deadline, and that
    // read is still out when the app stops and the test clock passes the wake time.
    state.gated = true;
    await parkRun(raw, "r1", T0, T0 + HOUR);
    await until(() => state.waiting === 1, "the deadline read after the park");
    const stopping = scheduler.stop(5_000);
    time.advance(HOUR + 1);
    state.gate.open();
    await stopping;
    await scheduler.settled();

    expect(resumed).toEqual([]);
    const run = await raw.getRun("r1");
    expect(run).toMatchObject({ status: "sleeping", wakeAt: T0 + HOUR, leaseOwner: null, recoveries: 0 });
  });

  it("a claim that answers after stop gives its due runs back, unrun and with no recovery counted", async () => {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const time = createTimeTravel(T0);
    await parkRun(raw, "r1", T0, T0 + HOUR);
    time.advance(HOUR + 1);
    const { store, state } = gatedStore(raw, "claimDueRuns");
    const { scheduler, resumed } = schedulerOver(store, time);
    state.gated = true;
    scheduler.start();
    await until(() => state.waiting === 1, "the first claim");
    const stopping = scheduler.stop(5_000);
    state.gate.open();
    await stopping;

    expect(resumed).toEqual([]);
    expect(await raw.getRun("r1")).toMatchObject({ leaseOwner: null, recoveries: 0 });
    // Given back due now: the next claimer takes it as an ordinary wake, not as a recovery.
    const [taken] = await raw.claimDueRuns({ owner: "s/2", now: time.now(), max: 1, leaseMs: 30_000 });
    expect(taken?.run).toMatchObject({ id: "r1", status: "running", leaseOwner: "s/2", recoveries: 0 });
  });
});
