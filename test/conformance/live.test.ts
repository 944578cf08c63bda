// Live signals on every driver: tape replay then follow, resume after a position, keys, retention.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createApp, flow, on, signal, OkeError } from "../../src/index.ts";
import type { LiveEntry } from "../../src/signal/live-runtime.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const status = () =>
  signal.live("orders.status", { schema: z.object({ state: z.string() }), retention: "1h" });

/** Collects what a live listener hears. */
function collect<P>() {
  const got: Array<LiveEntry<P>> = [];
  return { got, listener: (e: LiveEntry<P>) => void got.push(e) };
}

describe.each(drivers)("signal.live on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("app.live replays the tape of a key, then streams new entries in order", async () => {
    const feed = status();
    const app = await apps.make([{ feed }]);
    await app.emit(feed, { state: "placed" }, { key: "o1" });
    await app.emit(feed, { state: "other order" }, { key: "o2" });
    await app.emit(feed, { state: "paid" }, { key: "o1" });
    const c = collect<{ state: string }>();
    const stop = app.live(feed, { key: "o1" }, c.listener);
    await until(() => c.got.length === 2, "history");
    await app.emit(feed, { state: "shipped" }, { key: "o1" });
    await app.emit(feed, { state: "delivered" }, { key: "o1" });
    await until(() => c.got.length === 4, "new entries");
    expect(c.got.map((e) => e.payload.state)).toEqual(["placed", "paid", "shipped", "delivered"]);
    expect(c.got.every((e) => e.key === "o1")).toBe(true);
    const positions = c.got.map((e) => e.position);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(new Set(positions).size).toBe(4);
    stop();
  });

  it("app.live(signal, listener) without options follows the unkeyed tape from its start", async () => {
    const feed = status();
    const app = await apps.make([{ feed }]);
    await app.emit(feed, { state: "one" });
    await app.emit(feed, { state: "keyed" }, { key: "k" });
    const c = collect<{ state: string }>();
    const stop = app.live(feed, c.listener);
    await app.emit(feed, { state: "two" });
    await until(() => c.got.length === 2, "both unkeyed entries");
    expect(c.got.map((e) => [e.payload.state, e.key])).toEqual([
      ["one", null],
      ["two", null],
    ]);
    stop();
  });

  it("resumes exactly after a position: no gap, no duplicate", async () => {
    const feed = status();
    const app = await apps.make([{ feed }]);
    for (const state of ["a", "b", "c", "d"]) await app.emit(feed, { state }, { key: "k" });
    const first = collect<{ state: string }>();
    const stop1 = app.live(feed, { key: "k" }, first.listener);
    await until(() => first.got.length === 4, "first reader");
    stop1();
    const resume = collect<{ state: string }>();
    const stop2 = app.live(feed, { key: "k", after: first.got[1]!.position }, resume.listener);
    await app.emit(feed, { state: "e" }, { key: "k" });
    await until(() => resume.got.length === 3, "resumed reader");
    expect(resume.got.map((e) => e.payload.state)).toEqual(["c", "d", "e"]);
    stop2();
  });

  it("many readers of one tape each get every entry once, in order, while emits race the replay", async () => {
    const feed = status();
    const app = await apps.make([{ feed }]);
    const readers = Array.from({ length: 5 }, () => collect<{ state: string }>());
    const stops: Array<() => void> = [];
    const emits: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      emits.push(app.emit(feed, { state: `s${i}` }, { key: "k" }));
      if (i % 4 === 0) stops.push(app.live(feed, { key: "k" }, readers[i / 4]!.listener));
    }
    await Promise.all(emits);
    await until(() => readers.every((r) => r.got.length === 20), "every reader has 20");
    const order = readers[0]!.got.map((e) => e.position);
    for (const r of readers) expect(r.got.map((e) => e.position)).toEqual(order);
    for (const s of stops) s();
  });

  it("entries older than the retention are not replayed and are pruned in batches", async () => {
    const feed = status();
    const app = await apps.make([{ feed }]);
    await app.emit(feed, { state: "old" });
    app.time.advance("50m");
    await app.emit(feed, { state: "recent" });
    app.time.advance("15m");
    const c = collect<{ state: string }>();
    const stop = app.live(feed, {}, c.listener);
    await app.emit(feed, { state: "new" });
    await until(() => c.got.length === 2, "retained entries");
    expect(c.got.map((e) => e.payload.state)).toEqual(["recent", "new"]);
    expect(c.got[0]!.key).toBeNull();
    stop();
    // The prune tick (every 10 min at most) deleted what expired; a read ignoring expiry proves it.
    const raw = () =>
      app.store.readTape({ signal: "orders.status", key: "", after: 0, notBefore: 0, limit: 10 });
    await until(async () => (await raw()).length === 2, "old entry pruned");
  });

  it("checks the schema at emit (OKE1250); a durable emitter's entry is journaled and not doubled on resume", async () => {
    const feed = status();
    const emitter = flow("orders.progress", {
      durable: true,
      do: async (_: undefined, fx) => {
        await fx.emit(feed, { state: "started" }, { key: "d" });
        await fx.clock.sleep("wait", "1m");
        await fx.emit(feed, { state: "finished" }, { key: "d" });
      },
    });
    const app = await apps.make([{ feed, emitter }]);
    const bad = await app.emit(feed, { state: 1 } as never).catch((e: unknown) => e);
    expect((bad as OkeError).code).toBe("OKE1250");
    await app.invoke(emitter, undefined);
    app.time.advance("2m");
    await until(async () => (await app.operator.runs({ status: "completed" })).length === 1, "run completed");
    const c = collect<{ state: string }>();
    const stop = app.live(feed, { key: "d" }, c.listener);
    await until(() => c.got.length === 2, "both entries");
    expect(c.got.map((e) => e.payload.state)).toEqual(["started", "finished"]);
    stop();
  });

  it("an emit on one replica reaches a reader on another sharing the store", async () => {
    const feed = status();
    const store = await apps.store();
    const a = await apps.make([{ feed }], { store });
    const b = await apps.make([{ feed }], { store, time: a.time });
    const c = collect<{ state: string }>();
    const stop = b.live(feed, { key: "x" }, c.listener);
    await a.emit(feed, { state: "from A" }, { key: "x" });
    await until(() => c.got.length === 1, "B heard A");
    expect(c.got[0]!.payload.state).toBe("from A");
    stop();
  });
});

describe("signal.live declarations", () => {
  it("takes a duration for retention and refuses worker flows (OKE1078)", () => {
    // @ts-expect-error -- retention is a Duration: the type refuses what the run-time check refuses
    expect(() => signal.live("x", { retention: "1 hour" })).toThrow(
      'signal.live("x"): retention must be a duration like "24h", "30m" or "7d", got "1 hour"',
    );
    expect(signal.live("x").retention).toBeUndefined();
    const feed = signal.live("feed.x", { retention: "1h" });
    // @ts-expect-error -- on() refuses a live signal at compile time too (JavaScript callers get OKE1078)
    const w = on(feed, flow("feed.w", { do: () => undefined }));
    expect(() => createApp({ env: "test", modules: [{ w }] })).toThrow(/OKE1078|cannot have worker flows/);
  });
});
