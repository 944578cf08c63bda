// The overview's stranded section: runs of flows, messages of once signals and due clocks that no live instance serves, two apps on one store.
import { CSRF_HEADER } from "./auth.ts";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { clock, flow, on, signal } from "../index.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import { until } from "../../test/conformance/app-fixture.ts";
import type { Store } from "../store/types.ts";

const TOKEN = "stranded-secret-0123456789";
const T0 = 1_700_000_000_000;

// The legacy app: a durable flow that sleeps, and the worker of a once signal.
const legacyJobs = signal.once<{ n: number }>("legacy.jobs", { retries: 0 });
const handled: number[] = [];
// Message 99 holds its worker until `release` (a worker that hangs, then its instance goes away).
let release: () => void = () => undefined;
let held = new Promise<void>((r) => (release = r));
let holding = false;
const legacyWorker = on(
  legacyJobs,
  flow("legacy.work", {
    do: async ({ n }: { n: number }) => {
      if (n === 99) {
        holding = true;
        await held;
      }
      handled.push(n);
    },
  }),
);
const legacyWait = flow("legacy.wait", {
  durable: true,
  do: async (_: { x: number }, fx) => {
    await fx.clock.sleep("trial-end", "1h");
  },
});
// The Console's app: its own durable flow, and the legacy signal declared to emit it, with no worker
// (a web app: `optional` lets it emit with no flow bound here).
const jobsToEmit = signal.once<{ n: number }>("legacy.jobs", { retries: 0, optional: true });
const current = flow("current.flow", {
  durable: true,
  do: async (_: { x: number }, fx) => fx.step("s", () => 1),
});

// A clock only the legacy app declares: once that app is gone, nothing fires it.
let reportFires = 0;
const legacyReport = on(
  clock("legacy.report", { every: "1h" }),
  flow("legacy.report", { do: () => void reportFires++ }),
);
const HOUR = 3_600_000;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Body = any;

describe.each(drivers)("stranded work on the $name driver", (driver) => {
  const cleanups: Array<() => Promise<void>> = [];
  /** Store calls made through the Console app's view of the store, by method. */
  const calls = new Map<string, number>();
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function setup(): Promise<{
    store: Store;
    time: TimeTravel;
    consoleApp: App;
    startLegacy: () => Promise<App>;
    overview: () => Promise<Body>;
    api: (path: string, body?: unknown) => Promise<Response>;
    hideFleet: (hide: boolean) => void;
  }> {
    const made = await driver.make();
    cleanups.push(made.cleanup);
    const time = createTimeTravel(T0);
    let hidden = false;
    calls.clear();
    // The Console's view of the store, with the fleet hidable (a Console no instance heartbeats beside).
    const seen = new Proxy(made.store, {
      get(target, prop, receiver) {
        if (prop === "listInstances" && hidden) return async () => [];
        const v: unknown = Reflect.get(target, prop, receiver);
        if (typeof v !== "function") return v;
        return (...a: unknown[]) => {
          if (typeof prop === "string") calls.set(prop, (calls.get(prop) ?? 0) + 1);
          return (v as (...a: unknown[]) => unknown).apply(target, a);
        };
      },
    });
    const consoleApp = createApp({
      modules: [{ current, jobsToEmit }],
      env: "test",
      clock: time,
      store: seen,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    cleanups.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const { console: c } = await consoleApp.start({ port: 0, host: "127.0.0.1" });
    const url = c!.url;
    const startLegacy = async (): Promise<App> => {
      const app = createApp({
        modules: [{ legacyJobs, legacyWorker, legacyWait }],
        env: "test",
        clock: time,
        store: made.store,
        config: { signals: { leaseMs: 5_000 } },
      });
      cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
      await app.start({ port: 0, host: "127.0.0.1" });
      return app;
    };
    const overview = async (): Promise<Body> => {
      const res = await fetch(`${url}/api/overview`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      return res.json();
    };
    const api = (path: string, body?: unknown): Promise<Response> =>
      fetch(`${url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", [CSRF_HEADER]: "1" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    return {
      store: made.store,
      time,
      consoleApp,
      startLegacy,
      overview,
      api,
      hideFleet: (h) => (hidden = h),
    };
  }

  it("a stopped app's sleeping runs and its signal's pending messages are stranded until it starts again", async () => {
    handled.length = 0;
    const { consoleApp, startLegacy, overview, hideFleet } = await setup();
    const legacy = await startLegacy();
    await legacy.invoke(legacyWait, { x: 1 });
    await consoleApp.invoke(current, { x: 1 });
    await until(async () => (await overview()).instances === 2, "both heartbeats");
    // Both apps live: the legacy flow and signal have an instance; nothing is stranded.
    expect((await overview()).stranded).toEqual({ checked: true, flows: [], signals: [], clocks: [] });

    await legacy.stop();
    cleanups.pop(); // stopped already
    for (let n = 1; n <= 3; n++) await consoleApp.emit(jobsToEmit, { n });
    await until(async () => (await overview()).stranded.flows.length === 1, "the stranded flow");
    const o = await overview();
    expect(o.instances).toBe(1);
    expect(o.stranded).toEqual({
      checked: true,
      flows: [{ name: "legacy.wait", runs: { sleeping: 1 }, dueAt: T0 + 3_600_000 }],
      signals: [
        {
          name: "legacy.jobs",
          pending: 3,
          inflight: 0,
          leaseLapsedAt: null,
          oldestPendingAgeMs: expect.any(Number),
          declared: true,
        },
      ],
      clocks: [],
    });
    // The Console's own app lists its flows only: the stranded flow is in the stranded section alone.
    expect(o.flows.map((f: { name: string }) => f.name)).toEqual(["current.flow"]);

    // No heartbeat at all (a Console beside no instance): nothing is flagged; the answer says so.
    hideFleet(true);
    expect((await overview()).stranded).toEqual({ checked: false, flows: [], signals: [], clocks: [] });
    hideFleet(false);

    const back = await startLegacy();
    await until(async () => (await overview()).instances === 2, "the legacy app back");
    await back.idle();
    expect(handled.sort()).toEqual([1, 2, 3]);
    expect((await overview()).stranded).toEqual({ checked: true, flows: [], signals: [], clocks: [] });
  });

  it("a clock no live instance declares is stranded once a slot is due: listed with its fix, in one schedules read; the schedules list marks it stranded too", async () => {
    reportFires = 0;
    const { consoleApp, store, time, overview, hideFleet, api } = await setup();
    /** The schedules API's row of the clock: stranded as the overview judges it. */
    const listed = async (): Promise<Body> =>
      ((await (await api("/api/schedules")).json()) as { schedules: Body[] }).schedules.find(
        (x) => x.name === "legacy.report",
      )!;
    const startClockApp = async (): Promise<App> => {
      const app = createApp({ modules: [{ legacyReport }], env: "test", clock: time, store });
      cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
      await app.start({ port: 0, host: "127.0.0.1" });
      return app;
    };
    const clocks = async (): Promise<Body[]> => {
      const o = await overview();
      return o.instances === 0 ? [] : o.stranded.clocks;
    };
    const firstSlot = Math.floor(T0 / HOUR) * HOUR + HOUR;
    const clockApp = await startClockApp();
    await until(async () => (await overview()).instances === 2, "both heartbeats");
    // Declared by a live instance, and not due yet: nothing stranded.
    expect((await overview()).stranded.clocks).toEqual([]);
    expect((await listed()).stranded).toBe(false);

    await clockApp.stop();
    cleanups.pop(); // stopped already
    await until(async () => (await overview()).instances === 1, "the clock's app gone");
    // Gone, but its next slot is still ahead: nothing has been missed yet.
    expect((await overview()).stranded.clocks).toEqual([]);
    expect((await consoleApp.operator.schedules.get("legacy.report")).orphaned).toBe(false);

    // Its slot passes with nothing to fire it: still `active`, and now stranded.
    time.set(firstSlot + 60_000);
    await until(async () => (await clocks()).length === 1, "the stranded clock");
    calls.clear();
    const o = await overview();
    expect(o.stranded.clocks).toEqual([
      {
        name: "legacy.report",
        flow: "legacy.report",
        cron: null,
        every: "1h",
        timezone: "UTC",
        dueAt: firstSlot,
        lastFiredAt: null,
        fix: expect.stringMatching(
          /^Deploy an instance whose code declares this clock: .+ pause it: .+orphaned\.$/,
        ),
      },
    ]);
    // One read of the schedules for the whole list, none per clock.
    expect(calls.get("listSchedules")).toBe(1);
    expect(calls.get("getSchedule") ?? 0).toBe(0);
    // The schedules list (oke schedules, the Schedules view) says so too, with the same fix.
    expect(await listed()).toMatchObject({
      paused: false,
      orphaned: false,
      stranded: true,
      nextFireAt: firstSlot,
      strandedFix: o.stranded.clocks[0].fix,
    });
    expect((await consoleApp.operator.schedules.get("legacy.report")).paused).toBe(false);

    // A paused clock is not expected to fire: not stranded. Resumed, it waits for its next slot again.
    await consoleApp.operator.schedules.pause("legacy.report");
    expect((await overview()).stranded.clocks).toEqual([]);
    await consoleApp.operator.schedules.resume("legacy.report");
    expect((await overview()).stranded.clocks).toEqual([]);
    time.advance(HOUR);
    await until(async () => (await clocks()).length === 1, "stranded again after its next slot");

    // No heartbeat at all: nothing is judged.
    hideFleet(true);
    expect((await overview()).stranded).toEqual({ checked: false, flows: [], signals: [], clocks: [] });
    expect((await listed()).stranded).toBe(false);
    hideFleet(false);

    // Deployed again: it fires the missed slot at boot and is served.
    await startClockApp();
    await until(async () => (await overview()).instances === 2, "the clock's app back");
    await until(() => reportFires === 1, "the catch-up fire");
    expect((await overview()).stranded.clocks).toEqual([]);
    expect((await listed()).stranded).toBe(false);
  });

  it("an inflight message counts once its lease lapsed with no live consumer", async () => {
    handled.length = 0;
    holding = false;
    held = new Promise<void>((r) => (release = r));
    const { consoleApp, startLegacy, overview, time } = await setup();
    const legacy = await startLegacy();
    await until(async () => (await overview()).instances === 2, "both heartbeats");
    await consoleApp.emit(jobsToEmit, { n: 99 });
    await until(() => holding, "the worker holding message 99");
    // Its instance goes away with the message still inflight (the stop gives up on the handler).
    await legacy.stop({ timeoutMs: 50 });
    cleanups.pop();
    await until(async () => (await overview()).instances === 1, "the legacy app gone");
    // The lease is still live: a stopping instance may yet settle it.
    expect((await overview()).stranded.signals).toEqual([]);
    time.advance(6_000);
    const o = await overview();
    expect(o.stranded.signals).toEqual([
      {
        name: "legacy.jobs",
        pending: 0,
        inflight: 1,
        leaseLapsedAt: T0 + 5_000,
        oldestPendingAgeMs: null,
        declared: true,
      },
    ]);
    release();
  });

  it("a once signal removed from the code entirely: its pending messages are listed as stranded", async () => {
    const { overview, store, time, api } = await setup();
    // The app that had it: declares and consumes legacy.gone, emits three, and is stopped before its
    // workers ever start (an emit before boot) — the deploy that followed dropped the signal and its worker.
    const gone = signal.once<{ n: number }>("legacy.gone", { retries: 0 });
    const goneWorker = on(
      gone,
      flow("legacy.gone.work", {
        do: async ({ n }: { n: number }) => {
          if (n === 9) throw new Error("refused");
        },
      }),
    );
    // An earlier deploy of it ran and left one dead letter.
    const ran = createApp({ modules: [{ gone, goneWorker }], env: "test", clock: time, store });
    await ran.start({ port: 0, host: "127.0.0.1" });
    await ran.emit(gone, { n: 9 });
    await until(async () => (await store.stats("legacy.gone", time.now())).dead === 1, "the dead letter");
    await ran.stop();
    const old = createApp({ modules: [{ gone, goneWorker }], env: "test", clock: time, store });
    for (let n = 1; n <= 3; n++) await old.emit(gone, { n });
    await old.stop();
    // A broadcast copy left behind is not a stranded once signal: the janitor clears copies.
    await store.enqueue(
      [
        {
          id: "copy-1",
          signal: "~broadcast:legacy.news:legacy.reader",
          key: null,
          payload: {},
          parentRunId: null,
        },
      ],
      T0,
    );
    time.advance(1_000);
    await until(async () => (await overview()).instances === 1, "the Console's own heartbeat");
    const o = await overview();
    // The Console's app never mentions legacy.gone: it is not among its signals, only stranded.
    expect(o.signals.map((s: { name: string }) => s.name)).not.toContain("legacy.gone");
    expect(o.stranded).toEqual({
      checked: true,
      flows: [],
      signals: [
        {
          name: "legacy.gone",
          pending: 3,
          inflight: 0,
          leaseLapsedAt: null,
          oldestPendingAgeMs: 1_000,
          declared: false,
        },
      ],
      clocks: [],
    });
    // What it left can be read and its dead letters discarded (oke dead legacy.gone works)…
    const view = await api("/api/signals/legacy.gone");
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({
      name: "legacy.gone",
      delivery: "once",
      declared: false,
      flows: [],
      pending: 3,
      inflight: 0,
      dead: 1,
      delivered: 0,
      oldestPendingAgeMs: 1_000,
      throughput: { bucketMs: 60_000 },
    });
    expect(((await (await api("/api/signals/legacy.jobs")).json()) as Body).declared).toBe(true);
    const pending = await api("/api/signals/legacy.gone/messages?status=pending");
    expect(pending.status).toBe(200);
    expect(((await pending.json()) as { items: unknown[] }).items).toHaveLength(3);
    const dead = (await (await api("/api/signals/legacy.gone/dead")).json()) as {
      items: Array<{ id: string }>;
    };
    expect(dead.items).toHaveLength(1);
    expect((await api("/api/signals/legacy.gone/discard", { all: true, dryRun: true })).status).toBe(200);
    const discarded = await api("/api/signals/legacy.gone/discard", { ids: [dead.items[0]!.id] });
    expect(discarded.status).toBe(200);
    expect(await discarded.json()).toMatchObject({ discarded: [dead.items[0]!.id], count: 1 });
    expect((await store.stats("legacy.gone", time.now())).dead).toBe(0);
    // …but not replayed from an app that does not declare it; and a name with nothing stored, or a
    // broadcast copy queue, is still no signal here.
    expect((await api("/api/signals/legacy.gone/replay", { all: true })).status).toBe(404);
    expect((await api("/api/signals/never.was/messages")).status).toBe(404);
    expect((await api("/api/signals/never.was")).status).toBe(404);
    const copies = encodeURIComponent("~broadcast:legacy.news:legacy.reader");
    expect((await api(`/api/signals/${copies}/messages`)).status).toBe(404);
    expect((await api(`/api/signals/${copies}`)).status).toBe(404);
  });
});
