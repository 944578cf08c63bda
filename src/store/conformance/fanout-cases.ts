/** Conformance cases of the FanoutStore: broadcast subscriptions and live tapes. */
import { describe, expect, it } from "vitest";
import type { FanoutStore, TapeEntry, TapeRef } from "../fanout-types.ts";
import { freshStore, T0, type ConformanceOptions, type StoreFactory } from "./harness.ts";

const entry = (id: string, key = "k1", signal = "live.a") => ({ id, signal, key, payload: { id } });

const read = (
  store: FanoutStore,
  after: number,
  opts: { key?: string; notBefore?: number; limit?: number; upTo?: number } = {},
) =>
  store.readTape({
    signal: "live.a",
    key: opts.key ?? "k1",
    after,
    notBefore: opts.notBefore ?? 0,
    limit: opts.limit ?? 100,
    ...(opts.upTo === undefined ? {} : { upTo: opts.upTo }),
  });

const ids = (entries: readonly TapeEntry[]): string[] => entries.map((e) => e.id);

export function fanoutCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("broadcast subscriptions", () => {
    const store = freshStore(factory);
    const sub = (signal: string, flow: string) => ({ signal, flow });

    it("a heartbeat makes its pairs live until they expire; pairs of many instances are listed once", async () => {
      const s = store();
      await s.heartbeatSubscriptions({
        instance: "i1",
        subscriptions: [sub("b.x", "f1"), sub("b.x", "f2")],
        now: T0,
        expiresAt: T0 + 15_000,
      });
      await s.heartbeatSubscriptions({
        instance: "i2",
        subscriptions: [sub("b.x", "f1")],
        now: T0,
        expiresAt: T0 + 20_000,
      });
      const live = async (now: number) =>
        (await s.liveSubscriptions(now)).map((x) => `${x.signal}/${x.flow}`).sort();
      expect(await live(T0)).toEqual(["b.x/f1", "b.x/f2"]);
      expect(await live(T0 + 15_000)).toEqual(["b.x/f1"]);
      expect(await live(T0 + 20_000)).toEqual([]);
    });

    it("a heartbeat replaces the instance's earlier list", async () => {
      const s = store();
      const hb = (subs: Array<{ signal: string; flow: string }>) =>
        s.heartbeatSubscriptions({ instance: "i1", subscriptions: subs, now: T0, expiresAt: T0 + 15_000 });
      await hb([sub("b.x", "f1"), sub("b.y", "f9")]);
      await hb([sub("b.x", "f1")]);
      expect(await s.liveSubscriptions(T0)).toEqual([sub("b.x", "f1")]);
    });

    it("a pair whose every instance expired is lapsed until forgotten", async () => {
      const s = store();
      await s.heartbeatSubscriptions({
        instance: "i1",
        subscriptions: [sub("b.x", "f1")],
        now: T0,
        expiresAt: T0 + 15_000,
      });
      expect(await s.lapsedSubscriptions(T0 + 14_999, 10)).toEqual([]);
      expect(await s.lapsedSubscriptions(T0 + 15_000, 10)).toEqual([
        { ...sub("b.x", "f1"), expiredAt: T0 + 15_000 },
      ]);
      // A newer heartbeat of another instance survives the forget.
      await s.heartbeatSubscriptions({
        instance: "i2",
        subscriptions: [sub("b.x", "f1")],
        now: T0 + 16_000,
        expiresAt: T0 + 31_000,
      });
      await s.forgetSubscription(sub("b.x", "f1"), T0 + 15_000);
      expect(await s.liveSubscriptions(T0 + 16_000)).toEqual([sub("b.x", "f1")]);
      expect(await s.lapsedSubscriptions(T0 + 31_000, 10)).toEqual([
        { ...sub("b.x", "f1"), expiredAt: T0 + 31_000 },
      ]);
      await s.forgetSubscription(sub("b.x", "f1"), T0 + 31_000);
      expect(await s.lapsedSubscriptions(T0 + 60_000, 10)).toEqual([]);
    });

    it("a pair with one live instance is not lapsed", async () => {
      const s = store();
      await s.heartbeatSubscriptions({
        instance: "i1",
        subscriptions: [sub("b.x", "f1")],
        now: T0,
        expiresAt: T0 + 1,
      });
      await s.heartbeatSubscriptions({
        instance: "i2",
        subscriptions: [sub("b.x", "f1")],
        now: T0,
        expiresAt: T0 + 50_000,
      });
      expect(await s.lapsedSubscriptions(T0 + 10_000, 10)).toEqual([]);
    });
  });

  describe("live tapes", () => {
    const store = freshStore(factory);

    it("appends get increasing positions in order; reads resume exactly after a position", async () => {
      const s = store();
      const out = await s.appendTape([entry("e1"), entry("e2"), entry("e3")], T0);
      expect(ids(out)).toEqual(["e1", "e2", "e3"]);
      const [p1, p2, p3] = out.map((e) => e.position) as [number, number, number];
      expect(p1 < p2 && p2 < p3).toBe(true);
      expect(out[0]).toMatchObject({ signal: "live.a", key: "k1", payload: { id: "e1" }, createdAt: T0 });
      expect(ids(await read(s, 0))).toEqual(["e1", "e2", "e3"]);
      expect(ids(await read(s, p1))).toEqual(["e2", "e3"]);
      expect(ids(await read(s, p3))).toEqual([]);
      expect(ids(await read(s, 0, { limit: 2 }))).toEqual(["e1", "e2"]);
      expect(ids(await read(s, 0, { upTo: p2 }))).toEqual(["e1", "e2"]);
      expect(await s.tapeHead("live.a", "k1")).toBe(p3);
      expect(await s.tapeHead("live.a", "nope")).toBe(0);
    });

    it("each (signal, key) is its own tape", async () => {
      const s = store();
      await s.appendTape(
        [entry("a1", "A"), entry("b1", "B"), entry("a2", "A"), entry("u1", "", "live.b")],
        T0,
      );
      expect(ids(await read(s, 0, { key: "A" }))).toEqual(["a1", "a2"]);
      expect(ids(await read(s, 0, { key: "B" }))).toEqual(["b1"]);
      expect(ids(await s.readTape({ signal: "live.b", key: "", after: 0, notBefore: 0, limit: 10 }))).toEqual(
        ["u1"],
      );
    });

    it("an id already on the tape is not appended again", async () => {
      const s = store();
      await s.appendTape([entry("e1")], T0);
      expect(await s.appendTape([entry("e1")], T0 + 1)).toEqual([]);
      expect(ids(await read(s, 0))).toEqual(["e1"]);
    });

    it("expired entries are never read; pruning deletes them in batches and positions never repeat", async () => {
      const s = store();
      const old = await s.appendTape([entry("o1"), entry("o2"), entry("o3")], T0);
      await s.appendTape([entry("n1")], T0 + 10_000);
      expect(ids(await read(s, 0, { notBefore: T0 + 5_000 }))).toEqual(["n1"]);
      expect(await s.pruneTape("live.a", T0 + 5_000, 2)).toBe(2);
      expect(await s.pruneTape("live.a", T0 + 5_000, 2)).toBe(1);
      expect(await s.pruneTape("live.a", T0 + 5_000, 2)).toBe(0);
      expect(ids(await read(s, 0))).toEqual(["n1"]);
      // Every entry of tape k2 pruned: a later append still gets a position above any given before.
      await s.appendTape([entry("x1", "k2")], T0);
      expect(await s.pruneTape("live.a", T0 + 5_000, 10)).toBe(1);
      const again = await s.appendTape([entry("x2", "k2")], T0 + 20_000);
      expect(again[0]!.position).toBeGreaterThan(old[2]!.position);
      expect(ids(await read(s, 0, { key: "k2" }))).toEqual(["x2"]);
    });

    describe("tapeGap (optional: what a resuming reader can no longer get)", () => {
      if (options.tapeGap !== true) {
        it("is absent", () => {
          expect(Reflect.get(store(), "tapeGap")).toBeUndefined();
        });
        return;
      }
      const gap = (after: number, opts: { key?: string; notBefore?: number; signal?: string } = {}) => {
        const s = store();
        if (s.tapeGap === undefined) throw new Error("the driver has no tapeGap");
        return s.tapeGap({
          signal: opts.signal ?? "live.a",
          key: opts.key ?? "k1",
          after,
          notBefore: opts.notBefore ?? 0,
        });
      };

      it("is 0 while everything after the position is still on the tape", async () => {
        const s = store();
        const [a, b] = await s.appendTape([entry("g1"), entry("g2")], T0);
        expect(await gap(0)).toBe(0);
        expect(await gap(a!.position)).toBe(0);
        expect(await gap(b!.position)).toBe(0);
      });

      it("names the last expired entry after the position, pruned or not yet", async () => {
        const s = store();
        const [o1, o2] = await s.appendTape([entry("o1"), entry("o2")], T0);
        const [n1] = await s.appendTape([entry("n1")], T0 + 10_000);
        // Expired on read, not pruned yet: a reader after o1 would never get o2.
        expect(await gap(o1!.position, { notBefore: T0 + 5_000 })).toBe(o2!.position);
        expect(await gap(o2!.position, { notBefore: T0 + 5_000 })).toBe(0);
        // Pruned: the same answer without the expiry in the request.
        expect(await s.pruneTape("live.a", T0 + 5_000, 10)).toBe(2);
        expect(await gap(0)).toBe(o2!.position);
        expect(await gap(o1!.position)).toBe(o2!.position);
        expect(await gap(o2!.position)).toBe(0);
        expect(await gap(n1!.position)).toBe(0);
        // Pruning more raises it, never lowers it; another signal has none.
        await s.appendTape([entry("o3", "k2")], T0 + 1);
        const [late] = await s.appendTape([entry("o4", "k2")], T0 + 2);
        expect(await s.pruneTape("live.a", T0 + 5_000, 10)).toBe(2);
        expect(await gap(0, { key: "k2" })).toBe(late!.position);
        await s.pruneTape("live.a", T0, 10);
        expect(await gap(0, { key: "k2" })).toBe(late!.position);
        expect(await gap(0, { signal: "live.b" })).toBe(0);
      });

      it("counts a prune of the signal for each of its tapes (one number per signal: never a gap missed)", async () => {
        const s = store();
        const [b] = await s.appendTape([entry("b1", "B")], T0);
        const [a] = await s.appendTape([entry("a1", "A")], T0 + 10_000);
        await s.pruneTape("live.a", T0 + 5_000, 10);
        // Tape A lost nothing, but a reader of it resuming below b1 is told of a possible gap; one
        // at a1, after everything pruned, is not.
        expect(await gap(0, { key: "A" })).toBe(b!.position);
        expect(await gap(a!.position, { key: "A" })).toBe(0);
      });
    });

    it("pruning one signal leaves the others", async () => {
      const s = store();
      await s.appendTape([entry("a1"), entry("b1", "k1", "live.b")], T0);
      expect(await s.pruneTape("live.a", T0 + 1, 10)).toBe(1);
      expect(
        await s.readTape({ signal: "live.b", key: "k1", after: 0, notBefore: 0, limit: 10 }),
      ).toHaveLength(1);
    });

    it("subscribers hear the tapes an append touched", async () => {
      const s = store();
      const heard: TapeRef[] = [];
      let resolve!: () => void;
      const got = new Promise<void>((r) => (resolve = r));
      const stop = s.subscribeTapes((t) => {
        if (t === "all") return;
        heard.push(t);
        if (t.key === "k9") resolve();
      });
      await s.appendTape([entry("e1", "k9")], T0);
      await got;
      stop();
      expect(heard).toContainEqual({ signal: "live.a", key: "k9" });
    });
  });

  describe("live tapes: lastTapePosition (the bound of a resume)", () => {
    const store = freshStore(factory);
    if (options.lastTapePosition !== true) {
      // Optional in the contract: without it a live stream follows any resume position unchecked.
      it("is absent when the driver does not claim it", () => {
        expect(Reflect.get(store(), "lastTapePosition")).toBeUndefined();
      });
      return;
    }
    const last = (s: FanoutStore): Promise<number> => {
      if (s.lastTapePosition === undefined) throw new Error("the driver has no lastTapePosition");
      return s.lastTapePosition();
    };

    it("lastTapePosition is the last position given on any tape; a prune that empties a tape never lowers it", async () => {
      const s = store();
      const before = await last(s);
      const out = await s.appendTape([entry("e1"), entry("e2"), entry("e3")], T0);
      const p3 = out[2]!.position;
      expect(out[0]!.position).toBeGreaterThan(before);
      expect(await last(s)).toBe(p3);
      // Another tape's append moves it: one bound for every tape of the store.
      const [other] = await s.appendTape([entry("b1", "k1", "live.b")], T0);
      expect(await last(s)).toBe(other!.position);
      // Tape live.a/k1 pruned empty: the positions its readers saw stay at or below the bound
      // (a resume from p3 is accepted), and its next entry still comes after them.
      expect(await s.pruneTape("live.a", T0 + 1, 10)).toBe(3);
      expect(await s.pruneTape("live.b", T0 + 1, 10)).toBe(1);
      expect(ids(await read(s, 0))).toEqual([]);
      expect(await s.tapeHead("live.a", "k1")).toBeLessThanOrEqual(p3);
      expect(await last(s)).toBe(other!.position);
      expect(ids(await read(s, p3))).toEqual([]);
      const [next] = await s.appendTape([entry("e4")], T0 + 2);
      expect(next!.position).toBeGreaterThan(other!.position);
      expect(await last(s)).toBe(next!.position);
      expect(ids(await read(s, p3))).toEqual(["e4"]);
    });
  });
}
