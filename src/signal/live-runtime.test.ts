// LiveRuntime: its one subscription to the store's tape appends (a subscribe that threw is not kept), and stop.
import { afterEach, describe, expect, it } from "vitest";
import { gatedStore, until as untilTurn } from "../../test/conformance/app-fixture.ts";
import { systemClock } from "../clock/clock.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { LiveRuntime, type ReplayPace } from "./live-runtime.ts";
import { signal, type LiveSignal, type SignalHandle } from "./signal.ts";

/** Waits, re-checking every 10 ms, until `check` holds (a generous deadline: speed never decides). */
async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !check();) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("LiveRuntime's subscription to tape appends", () => {
  it("a subscribe that threw is tried again by the next reader, which then follows the tape", async () => {
    const memory = createMemoryStore();
    await memory.open();
    let refuse = true;
    const store: Store = {
      ...memory,
      subscribeTapes(listener) {
        if (refuse) throw new Error("subscribe refused");
        return memory.subscribeTapes(listener);
      },
    };
    const feed = signal.live("rt.feed");
    const rt = new LiveRuntime({
      store,
      clock: systemClock,
      logger: createLogger({ format: "silent" }),
      signals: new Map([[feed.name, feed]]),
    });
    const got: unknown[] = [];
    expect(() => rt.live(feed, {}, (e) => void got.push(e.payload))).toThrow("subscribe refused");
    refuse = false;
    const stop = rt.live(feed, {}, (e) => void got.push(e.payload));
    await rt.emit(feed, { n: 1 }, undefined, { flow: "test", runId: null });
    await until(() => got.length === 1, "the entry appended after the second reader subscribed");
    expect(got).toEqual([{ n: 1 }]);
    stop();
    await rt.stop();
    await memory.close();
  });
});

describe("LiveRuntime.stop", () => {
  const T0 = 1_000_000;
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  async function setup(method: keyof Store, signals: LiveSignal[]) {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedStore(raw, method);
    const time = createTimeTravel(T0);
    const rt = new LiveRuntime({
      store,
      clock: time,
      logger: createLogger({ format: "silent" }),
      signals: new Map<string, SignalHandle>(signals.map((s) => [s.name, s])),
    });
    return { raw, rt, state, time };
  }

  it("a tape read out at stop delivers nothing when it answers, and no read follows it", async () => {
    const feed = signal.live("rt.stop.feed");
    const t = await setup("readTape", [feed]);
    const got: unknown[] = [];
    t.rt.live(feed, {}, (e) => void got.push(e.payload));
    // The reader's catch-up read and the first follow read: it follows the tape now.
    await untilTurn(() => t.state.answered === 2, "the reader caught up");
    t.state.gated = true;
    await t.rt.emit(feed, { n: 1 }, undefined, { flow: "test", runId: null });
    await untilTurn(() => t.state.waiting === 1, "the follow read after the append");
    let stopped = false;
    const stopping = t.rt.stop(5_000).then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false); // it waits for the read in flight
    t.state.gate.open();
    await stopping;
    await new Promise((r) => setImmediate(r));

    expect(got).toEqual([]);
    expect(t.state.calls.get("readTape")).toBe(3);
  });

  it("a prune out at stop prunes no other signal afterwards, with the clock read after the stop", async () => {
    const a = signal.live("rt.stop.a", { retention: "1h" });
    const b = signal.live("rt.stop.b", { retention: "1h" });
    const t = await setup("pruneTape", [a, b]);
    await t.raw.appendTape([{ id: "a1", signal: a.name, key: "", payload: 1 }], T0);
    await t.raw.appendTape([{ id: "b1", signal: b.name, key: "", payload: 1 }], T0);
    t.rt.start();
    t.state.gated = true;
    t.time.advance("10m"); // the first prune: signal a's batch is out
    await untilTurn(() => t.state.waiting === 1, "the prune of signal a");
    const stopping = t.rt.stop(5_000);
    t.time.advance("2h"); // b's entry is past its retention by the clock now
    t.state.gate.open();
    await stopping;

    expect(t.state.calls.get("pruneTape")).toBe(1);
    const left = await t.raw.readTape({ signal: b.name, key: "", after: 0, notBefore: 0, limit: 10 });
    expect(left.map((e) => e.id)).toEqual(["b1"]);
  });
});

describe("LiveRuntime replay with a pace", () => {
  /** A pace that takes `room` entries, then is full until the test resumes it. */
  function pacedReader(room: number) {
    const got: number[] = [];
    const state = { taken: 0, resume: undefined as (() => void) | undefined, following: 0 };
    const pace: ReplayPace = {
      full: () => state.taken >= room,
      paused: (resume) => {
        state.resume = resume;
      },
      following: () => void state.following++,
    };
    const listener = (e: { payload: unknown }): void => {
      state.taken++;
      got.push((e.payload as { n: number }).n);
    };
    const resume = (): void => {
      const r = state.resume;
      state.resume = undefined;
      state.taken = 0;
      r?.();
    };
    return { got, state, pace, listener, resume };
  }

  async function setup() {
    const store = createMemoryStore();
    await store.open();
    const feed = signal.live("rt.paced");
    const rt = new LiveRuntime({
      store,
      clock: systemClock,
      logger: createLogger({ format: "silent" }),
      signals: new Map([[feed.name, feed]]),
    });
    const emit = (n: number) => rt.emit(feed, { n }, undefined, { flow: "test", runId: null });
    return { store, feed, rt, emit };
  }

  it("a full reader waits without holding up the tape's other readers, then gets the rest in order, once", async () => {
    const { store, feed, rt, emit } = await setup();
    for (let n = 0; n < 10; n++) await emit(n);
    const slow = pacedReader(3);
    rt.live(feed, {}, slow.listener, slow.pace);
    await until(() => slow.state.resume !== undefined, "the replay to pause");
    expect(slow.got).toEqual([0, 1, 2]);

    // Another reader replays and follows meanwhile; the paused one is not given what it follows.
    const other: number[] = [];
    rt.live(feed, { after: 0 }, (e) => void other.push((e.payload as { n: number }).n));
    await until(() => other.length === 10, "the other reader's replay");
    await emit(10);
    await until(() => other.length === 11, "the other reader to follow");
    expect(slow.got).toEqual([0, 1, 2]);
    expect(slow.state.following).toBe(0);

    for (let i = 0; i < 10 && slow.state.following === 0; i++) {
      slow.resume();
      await until(() => slow.state.resume !== undefined || slow.state.following === 1, "the next round");
    }
    expect(slow.state.following).toBe(1);
    expect(slow.got).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    await emit(11);
    await until(() => slow.got.length === 12, "the entry appended after the replay");
    expect(slow.got.at(-1)).toBe(11);
    await rt.stop();
    await store.close();
  });

  it("stop ends a paused replay: the stop does not wait for it, and a late resume delivers nothing", async () => {
    const { store, feed, rt, emit } = await setup();
    for (let n = 0; n < 5; n++) await emit(n);
    const slow = pacedReader(2);
    rt.live(feed, {}, slow.listener, slow.pace);
    await until(() => slow.state.resume !== undefined, "the replay to pause");
    await rt.stop(); // no timeout: it must not wait on the paused reader
    slow.resume();
    await new Promise((r) => setImmediate(r));
    expect(slow.got).toEqual([0, 1]);
    await store.close();
  });
});

describe("a resuming reader's gap", () => {
  it("is told before any entry, even when the first check failed (an outage): the next round checks again", async () => {
    const memory = createMemoryStore();
    await memory.open();
    let refuse = 1;
    const store: Store = {
      ...memory,
      tapeGap(req) {
        if (refuse-- > 0) return Promise.reject(new Error("connection terminated"));
        return memory.tapeGap!(req);
      },
    };
    const feed = signal.live("rt.gap", { retention: "1h" });
    const time = createTimeTravel(1_000_000);
    const rt = new LiveRuntime({
      store,
      clock: time,
      logger: createLogger({ format: "silent" }),
      signals: new Map([[feed.name, feed]]),
    });
    const emit = (n: number) => rt.emit(feed, { n }, undefined, { flow: "test", runId: null });
    await emit(1);
    const [seen] = await memory.readTape({ signal: feed.name, key: "", after: 0, notBefore: 0, limit: 1 });
    await emit(2);
    time.advance("2h"); // 1 and 2 expired
    await emit(3);
    const got: string[] = [];
    const stop = rt.live(
      feed,
      { after: seen!.position, onGap: (g) => got.push(`gap through ${g.through > seen!.position}`) },
      (e) => got.push(`entry ${(e.payload as { n: number }).n}`),
    );
    // The failed check delivered nothing; an append wakes the feed, which checks again first.
    await until(() => refuse === 0, "the first, failing check");
    expect(got).toEqual([]);
    await emit(4);
    await until(() => got.length === 3, "the gap, 3 and 4");
    expect(got).toEqual(["gap through true", "entry 3", "entry 4"]);
    stop();
    await rt.stop();
    await memory.close();
  });
});
