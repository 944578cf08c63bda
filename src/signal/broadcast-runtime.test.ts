// BroadcastRuntime.stop: a heartbeat, janitor or start awaiting the store at stop goes no further.
import { afterEach, describe, expect, it } from "vitest";
import { gatedStore, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { flow, type AnyFlow } from "../flow/flow.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { BROADCAST_PHYSICS, BroadcastRuntime, broadcastQueue } from "./broadcast-runtime.ts";
import { signal, type SignalHandle } from "./signal.ts";

const T0 = 1_000_000;
const SIGNAL = "bc.placed";

/** Lets every promise callback queued so far run (one macrotask), no wall-clock wait. */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("BroadcastRuntime.stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  async function setup() {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedStore(raw, "heartbeatSubscriptions");
    const time = createTimeTravel(T0);
    const placed = signal.broadcast(SIGNAL);
    const mine: AnyFlow = flow("bc.mine", { do: () => undefined });
    const handled: string[] = [];
    const rt = new BroadcastRuntime({
      store,
      clock: time,
      logger: recordingLogger().logger,
      instanceId: "i1",
      signals: new Map<string, SignalHandle>([[SIGNAL, placed]]),
      subscribers: new Map([[SIGNAL, [mine]]]),
      concurrency: 2,
      leaseMs: 30_000,
      handler: () => (m) => {
        handled.push(m.id);
        return Promise.resolve({ kind: "ok" });
      },
    });
    const copy = (id: string, flowName: string) =>
      raw.enqueue(
        [
          {
            id: `${id}/${flowName}`,
            signal: broadcastQueue(SIGNAL, flowName),
            key: null,
            payload: {},
            parentRunId: null,
          },
        ],
        time.now(),
      );
    return { raw, rt, state, time, handled, copy };
  }

  it("a tick whose heartbeat was out at stop runs no janitor afterwards, with the clock read after the stop", async () => {
    const t = await setup();
    // Another instance runs "bc.other" until T0 + TTL; one of its copies waits.
    await t.raw.heartbeatSubscriptions({
      instance: "i2",
      subscriptions: [{ signal: SIGNAL, flow: "bc.other" }],
      now: T0,
      expiresAt: T0 + BROADCAST_PHYSICS.SUBSCRIBER_TTL_MS,
    });
    await t.copy("e1", "bc.other");
    await t.rt.start();

    t.state.gated = true;
    t.time.advance(BROADCAST_PHYSICS.HEARTBEAT_MS);
    await until(() => t.state.waiting === 1, "the tick's heartbeat");
    const claimsAtStop = t.state.calls.get("claim") ?? 0;
    const stopping = t.rt.stop(5_000);
    // Past every subscriber's expiry: a janitor reading the clock now finds them all lapsed.
    t.time.advance(BROADCAST_PHYSICS.SUBSCRIBER_TTL_MS * 2);
    t.state.gate.open();
    await stopping;

    expect(t.state.calls.get("claim") ?? 0).toBe(claimsAtStop);
    expect(await t.raw.getMessage(`e1/bc.other`)).toMatchObject({ status: "pending", attempts: 0 });
    expect(await t.raw.lapsedSubscriptions(t.time.now(), 20)).toContainEqual(
      expect.objectContaining({ signal: SIGNAL, flow: "bc.other" }),
    );
  });

  it("a start whose first heartbeat was out at stop starts no copy worker: nothing is claimed or run", async () => {
    const t = await setup();
    await t.copy("e1", "bc.mine");
    t.state.gated = true;
    const starting = t.rt.start();
    await until(() => t.state.waiting === 1, "the start's heartbeat");
    let stopped = false;
    const stopping = t.rt.stop(5_000).then(() => (stopped = true));
    await turn();
    expect(stopped).toBe(false); // it waits for the heartbeat in flight
    t.state.gate.open();
    await Promise.all([starting, stopping]);
    await turn();

    expect(t.handled).toEqual([]);
    expect(t.state.calls.get("claim") ?? 0).toBe(0);
    expect(await t.raw.getMessage("e1/bc.mine")).toMatchObject({ status: "pending", attempts: 0 });
  });
});
