// SignalRuntime.start after (or while) stop: the boot that goes on after a stop starts no worker.
import { afterEach, describe, expect, it } from "vitest";
import { gate, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { flow, type AnyFlow } from "../flow/flow.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { signal, type SignalHandle } from "./signal.ts";
import { SignalRuntime } from "./signal-runtime.ts";

const T0 = 1_000_000;

describe("SignalRuntime.start and stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  /** A once signal and a broadcast, one flow each; the broadcast's heartbeat answers when `gated` is off. */
  async function setup() {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const hb = { gated: false, waiting: 0, gate: gate() };
    let claims = 0;
    const store = new Proxy(raw, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== "function") return value;
        const fn = (value as (...a: unknown[]) => unknown).bind(target);
        if (prop === "claim")
          return (...args: unknown[]) => {
            claims++;
            return fn(...args);
          };
        if (prop !== "heartbeatSubscriptions") return fn;
        return async (...args: unknown[]) => {
          if (hb.gated) {
            hb.waiting++;
            await hb.gate.promise;
          }
          return fn(...args);
        };
      },
    });
    const task = signal.once("sr.task");
    const news = signal.broadcast("sr.news");
    const onTask: AnyFlow = flow("sr.onTask", { do: () => undefined });
    const onNews: AnyFlow = flow("sr.onNews", { do: () => undefined });
    const ran: string[] = [];
    const rt = new SignalRuntime({
      store,
      clock: createTimeTravel(T0),
      logger: recordingLogger().logger,
      worker: "w1",
      signals: new Map<string, SignalHandle>([
        [task.name, task],
        [news.name, news],
      ]),
      subscribers: new Map([
        [task.name, [onTask]],
        [news.name, [onNews]],
      ]),
      concurrency: 2,
      prefetch: 2,
      leaseMs: 30_000,
      claimAtEmit: false,
      runner: {
        execute: (f, input, frame) => {
          ran.push(`${f.name!} ${frame.runId}`);
          return Promise.resolve(undefined);
        },
        deliverDurable: () => Promise.resolve({ kind: "ok" }),
        spentDurable: () => Promise.resolve(undefined),
      },
    });
    await raw.enqueue([{ id: "t1", signal: task.name, key: null, payload: {}, parentRunId: null }], T0);
    return { raw, rt, hb, ran, claims: () => claims };
  }

  it("a start called after stop starts nothing: no claim, no handler", async () => {
    const t = await setup();
    await t.rt.stop(0);
    await t.rt.start();
    await new Promise((r) => setImmediate(r));

    expect(t.claims()).toBe(0);
    expect(t.ran).toEqual([]);
    expect(await t.raw.getMessage("t1")).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("a stop while start awaits the broadcast heartbeat stops the pools it started and waits for the heartbeat", async () => {
    const t = await setup();
    t.hb.gated = true;
    const starting = t.rt.start();
    await until(() => t.hb.waiting === 1, "the broadcast heartbeat");
    // The once pool started before the heartbeat: its message runs, and stop waits for it.
    await until(() => t.ran.length === 1, "t1 ran");
    let stopped = false;
    const stopping = t.rt.stop(5_000).then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    t.hb.gate.open();
    await Promise.all([starting, stopping]);
    const claims = t.claims();
    await t.raw.enqueue(
      [
        {
          id: "e1/sr.onNews",
          signal: "~broadcast:sr.news:sr.onNews",
          key: null,
          payload: {},
          parentRunId: null,
        },
      ],
      T0,
    );
    await new Promise((r) => setImmediate(r));

    expect(t.ran).toEqual(["sr.onTask t1"]);
    expect(t.claims()).toBe(claims);
  });
});
