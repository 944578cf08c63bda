// Heartbeat: it says the instance's role; on stop, a beat out lands before the instance leaves the list, and none goes out after.
import { describe, expect, it } from "vitest";
import { gate, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { HEARTBEAT_MS, startHeartbeat } from "./heartbeat.ts";

describe("Heartbeat.stop", () => {
  it("stop waits for the beat out, then removes the instance; no beat follows, not even from setConsole", async () => {
    const raw = createMemoryStore();
    await raw.open();
    const time = createTimeTravel(1_000_000);
    const calls: string[] = [];
    const s = { gated: false, waiting: false, gate: gate() };
    const store = Object.assign(Object.create(raw) as Store, {
      heartbeat: async (...args: Parameters<Store["heartbeat"]>) => {
        calls.push("heartbeat");
        if (s.gated) {
          s.waiting = true;
          await s.gate.promise;
        }
        await raw.heartbeat(...args);
      },
      removeInstance: async (id: string) => {
        calls.push("removeInstance");
        await raw.removeInstance(id);
      },
    });
    const hb = startHeartbeat({
      store,
      clock: time,
      logger: recordingLogger().logger,
      instanceId: "i-1",
      env: "test",
      root: "/nonexistent",
      flows: [],
      signals: [],
      role: "worker",
    });
    await until(() => calls.length === 1, "the first beat");
    await new Promise((r) => setImmediate(r));
    // The fleet can tell a worker from a web instance.
    expect((await raw.listInstances(0)).map((i) => i.role)).toEqual(["worker"]);
    s.gated = true;
    time.advance(HEARTBEAT_MS);
    await until(() => s.waiting, "the second beat");
    let stopped = false;
    const stopping = hb.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    const stoppedBeforeTheBeatLanded = stopped;
    s.gate.open();
    await stopping;
    hb.setConsole("http://127.0.0.1:1");
    time.advance(5 * HEARTBEAT_MS);
    await new Promise((r) => setImmediate(r));

    expect(calls).toEqual(["heartbeat", "heartbeat", "removeInstance"]);
    expect(await raw.listInstances(0)).toEqual([]);
    expect(stoppedBeforeTheBeatLanded).toBe(false);
    await raw.close();
  });
});
