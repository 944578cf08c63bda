// RunRetention.stop: no prune batch goes out after stop (between batches, or from a start after stop), and stop waits for the one out.
import { describe, expect, it } from "vitest";
import { gate, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import type { RunRetentionStore } from "../store/retention-types.ts";
import { RunRetention } from "./run-retention.ts";

const HOUR = 3_600_000;

/** A retention store with always more to prune (each batch comes back full); `onCall` runs before each answers. */
function fullStore(onCall: (n: number) => Promise<void> | void = () => undefined) {
  const calls: number[] = [];
  const store: RunRetentionStore = {
    async pruneRuns(before, limit) {
      calls.push(before);
      await onCall(calls.length);
      return limit;
    },
  };
  return { store, calls };
}

const retention = (store: RunRetentionStore, time: ReturnType<typeof createTimeTravel>) =>
  new RunRetention({ store, clock: time, logger: recordingLogger().logger, retentionMs: HOUR, batch: 10 });

describe("RunRetention.stop", () => {
  it("a stop while the sweep yields between batches: the next batch never goes out", async () => {
    const time = createTimeTravel(0);
    let stopping: Promise<void> | undefined;
    // The first batch answers full; the stop lands in the sweep's yield before the next batch (a
    // setImmediate queued before the sweep's own runs first).
    const { store, calls } = fullStore((n) => {
      if (n === 1)
        setImmediate(() => {
          stopping = r.stop();
        });
    });
    const r = retention(store, time);
    r.start();
    time.advance(HOUR);
    await until(() => stopping !== undefined, "the stop between batches");
    await stopping;
    time.advance(3 * HOUR);
    await new Promise((res) => setImmediate(res));

    expect(calls).toHaveLength(1);
  });

  it("stop waits for the batch out, and nothing is swept after it", async () => {
    const time = createTimeTravel(0);
    const held = gate();
    let waiting = false;
    const { store, calls } = fullStore(async (n) => {
      if (n === 1) {
        waiting = true;
        await held.promise;
      }
    });
    const r = retention(store, time);
    r.start();
    time.advance(HOUR);
    await until(() => waiting, "the first batch");
    let stopped = false;
    const stopping = r.stop().then(() => (stopped = true));
    await new Promise((res) => setImmediate(res));
    expect(stopped).toBe(false);
    held.open();
    await stopping;
    time.advance(3 * HOUR);
    await new Promise((res) => setImmediate(res));

    expect(calls).toHaveLength(1);
  });

  it("start() after stop() (a boot that went on after the app stopped) arms no sweep", async () => {
    const time = createTimeTravel(0);
    const { store, calls } = fullStore();
    const r = retention(store, time);
    await r.stop();
    r.start();
    time.advance(3 * HOUR);
    await new Promise((res) => setImmediate(res));

    expect(calls).toEqual([]);
  });
});
