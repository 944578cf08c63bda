/** Conformance cases of dead letters, replay, discard, stats and pruning. */
import { describe, expect, it } from "vitest";
import type { Store } from "../types.ts";
import {
  claimOf,
  freshStore,
  idsOf,
  msg,
  outcome,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** Claims `id` (must be claimable now) and settles it dead with one failure. */
async function kill(store: Store, id: string, now: number, signal = "sig.a"): Promise<void> {
  const got = await store.claim({ signal, worker: "w", max: 100, now, leaseMs: 1_000 });
  const c = got.find((x) => x.id === id);
  expect(c, `message ${id} claimable`).toBeDefined();
  const others = got.filter((x) => x.id !== id).map((x) => outcome(x, "pending"));
  await store.settle(
    [outcome(c!, "dead", { code: "Error", message: `${id} failed`, at: now }), ...others],
    now,
  );
}

/** Dead letters, operator replay / discard, stats, pruning. */
export function deadLetterCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("dead letters, replay, discard, stats, prune", () => {
    const store = freshStore(factory);
    /** stats' optional deliveredFailed as this driver reports it: the count, or absent. */
    const failedCount = (n: number): { deliveredFailed?: number } =>
      options.deliveredFailed === true ? { deliveredFailed: n } : {};

    it("deadLetters lists one signal's dead messages oldest first, with their history", async () => {
      await store().enqueue([msg("m1", { key: "k1", payload: { n: 1 } })], T0 + 100);
      await store().enqueue([msg("m2", { payload: { n: 2 } })], T0 + 200);
      await store().enqueue([msg("m3", { payload: { n: 3 } }), msg("x1", { signal: "sig.b" })], T0 + 300);
      await kill(store(), "m3", T0 + 400);
      await kill(store(), "x1", T0 + 400, "sig.b");
      await kill(store(), "m1", T0 + 500);
      await kill(store(), "m2", T0 + 600);
      const dead = await store().deadLetters("sig.a");
      expect(idsOf(dead)).toEqual(["m1", "m2", "m3"]);
      expect(dead[0]).toMatchObject({
        id: "m1",
        signal: "sig.a",
        key: "k1",
        payload: { n: 1 },
        status: "dead",
        createdAt: T0 + 100,
      });
      // Earlier claims in this case retried m1 without a failure; only the fatal attempt is recorded.
      expect(dead[0]!.failures).toEqual([
        { code: "Error", message: "m1 failed", at: T0 + 500, attempt: dead[0]!.attempts },
      ]);
      expect(idsOf(await store().deadLetters("sig.a", 2))).toEqual(["m1", "m2"]);
      expect(idsOf(await store().deadLetters("sig.b"))).toEqual(["x1"]);
      expect(await store().deadLetters("sig.none")).toEqual([]);
    });

    it("replay moves dead to pending with attempts and lock reset, keeping the failure history", async () => {
      await store().enqueue([msg("m1")], T0);
      await kill(store(), "m1", T0);
      expect(await store().replay("sig.a", ["m1"], T0 + 50)).toEqual(["m1"]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "pending",
        attempts: 0,
        lockedBy: null,
        leaseExpiresAt: null,
        updatedAt: T0 + 50,
        failures: [{ code: "Error", message: "m1 failed", at: T0, attempt: 1 }],
      });
      expect(await store().deadLetters("sig.a")).toEqual([]);
    });

    it("replay counts each replay of a message in `replays` (absent before the first); a skipped id is not counted", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      await kill(store(), "m1", T0);
      expect(await store().getMessage("m1")).not.toHaveProperty("replays");
      await store().replay("sig.a", ["m1"], T0 + 1);
      expect(await store().getMessage("m1")).toMatchObject({ status: "pending", replays: 1 });
      await kill(store(), "m1", T0 + 2);
      expect(await store().getMessage("m1")).toMatchObject({ status: "dead", replays: 1 });
      await store().replay("sig.a", "all", T0 + 3);
      expect(await store().getMessage("m1")).toMatchObject({ status: "pending", replays: 2 });
      const m1 = (await claimOf(store(), "w", T0 + 4)).find((m) => m.id === "m1");
      await store().settle([outcome(m1!, "delivered")], T0 + 4);
      // Not dead: skipped, and not counted.
      expect(await store().replay("sig.a", ["m1", "m2"], T0 + 5)).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered", replays: 2 });
      expect(await store().getMessage("m2")).not.toHaveProperty("replays");
    });

    it("a replayed message is delivered exactly once more", async () => {
      await store().enqueue([msg("m1")], T0);
      await kill(store(), "m1", T0);
      await store().replay("sig.a", "all", T0 + 1);
      const got = await claimOf(store(), "w", T0 + 1);
      expect(got).toMatchObject([{ id: "m1", attempts: 1 }]);
      await store().settle([outcome(got[0]!, "delivered")], T0 + 1);
      expect(await claimOf(store(), "w", T0 + 10 * 60_000)).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered", attempts: 1 });
    });

    it("replay touches only dead messages of that signal; 'all' replays them oldest first", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3"), msg("x1", { signal: "sig.b" })], T0);
      await kill(store(), "m2", T0);
      await kill(store(), "m1", T0 + 1);
      await kill(store(), "x1", T0 + 1, "sig.b");
      expect(await store().replay("sig.a", ["m3", "x1", "ghost"], T0 + 2)).toEqual([]);
      expect(await store().replay("sig.a", "all", T0 + 2)).toEqual(["m1", "m2"]);
      expect(await store().getMessage("x1")).toMatchObject({ status: "dead" });
    });

    it("a replayed keyed message waits for its key, then goes before younger messages", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" }), msg("m3", { key: "k" })], T0);
      await kill(store(), "m1", T0);
      const [m2] = await claimOf(store(), "w", T0);
      expect(m2?.id).toBe("m2");
      await store().replay("sig.a", ["m1"], T0 + 1);
      expect(await claimOf(store(), "w", T0 + 1)).toEqual([]);
      await store().settle([outcome(m2!, "delivered")], T0 + 2);
      expect(idsOf(await claimOf(store(), "w", T0 + 2))).toEqual(["m1"]);
    });

    it("when the key's inflight lease expires, a replayed older message of that key goes first", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" })], T0);
      await kill(store(), "m1", T0);
      const [m2] = await store().claim({ signal: "sig.a", worker: "w1", max: 10, now: T0, leaseMs: 100 });
      expect(m2?.id).toBe("m2");
      await store().replay("sig.a", ["m1"], T0 + 1);
      const got = await store().claim({
        signal: "sig.a",
        worker: "w2",
        max: 10,
        now: T0 + 100,
        leaseMs: 100,
      });
      expect(idsOf(got)).toEqual(["m1"]);
      await store().settle([outcome(got[0]!, "delivered")], T0 + 101);
      expect(await claimOf(store(), "w3", T0 + 101)).toMatchObject([{ id: "m2", attempts: 2 }]);
    });

    it("discard removes dead messages only and returns their ids", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3")], T0);
      await kill(store(), "m1", T0);
      await kill(store(), "m2", T0);
      expect(await store().discard("sig.a", ["m1", "m3", "ghost"])).toEqual(["m1"]);
      expect(await store().getMessage("m1")).toBeUndefined();
      expect(await store().getMessage("m3")).toMatchObject({ status: "pending" });
      expect(await store().discard("sig.b", "all")).toEqual([]);
      expect(await store().discard("sig.a", "all")).toEqual(["m2"]);
      expect(await store().deadLetters("sig.a")).toEqual([]);
    });

    describe("discardPending (optional: an operator empties a queue nothing consumes)", () => {
      if (options.discardPending !== true) {
        it("is absent", () => {
          expect(Reflect.get(store(), "discardPending")).toBeUndefined();
        });
        return;
      }
      const discardPending = (signal: string, ids: readonly string[]): Promise<string[]> => {
        const s = store();
        if (s.discardPending === undefined) throw new Error("the driver has no discardPending");
        return s.discardPending(signal, ids);
      };

      it("removes only pending messages of the signal, in the order given, and nothing inflight, dead or elsewhere", async () => {
        await store().enqueue(
          [msg("m1"), msg("m2"), msg("m3"), msg("m4"), msg("x1", { signal: "sig.b" })],
          T0,
        );
        expect(idsOf(await claimOf(store(), "w", T0, 1))).toEqual(["m1"]);
        await kill(store(), "m2", T0 + 1);
        expect(await discardPending("sig.a", ["m3", "m1", "m2", "x1", "ghost", "m4", "m3"])).toEqual([
          "m3",
          "m4",
        ]);
        expect(await store().getMessage("m3")).toBeUndefined();
        expect(await store().getMessage("m4")).toBeUndefined();
        expect(await store().getMessage("m1")).toMatchObject({ status: "inflight" });
        expect(await store().getMessage("m2")).toMatchObject({ status: "dead" });
        expect(await store().getMessage("x1")).toMatchObject({ status: "pending" });
        expect(await store().stats("sig.a", T0 + 2)).toMatchObject({
          pending: 0,
          inflight: 1,
          dead: 1,
          oldestPendingAgeMs: null,
        });
        expect(await claimOf(store(), "w", T0 + 2)).toEqual([]);
        expect(await discardPending("sig.a", ["m3"])).toEqual([]);
        // The queue goes on: a new emit is claimed as usual.
        await store().enqueue([msg("m5")], T0 + 3);
        expect(idsOf(await claimOf(store(), "w", T0 + 3))).toEqual(["m5"]);
      });

      it("keeps per-key order: the key's next becomes the head, and waits while the key is inflight", async () => {
        await store().enqueue(
          [
            msg("a1", { key: "k" }),
            msg("a2", { key: "k" }),
            msg("a3", { key: "k" }),
            msg("b1", { key: "j" }),
            msg("b2", { key: "j" }),
            msg("c1", { key: "z" }),
          ],
          T0,
        );
        const first = await claimOf(store(), "w", T0, 1);
        expect(idsOf(first)).toEqual(["a1"]);
        // a2 behind an inflight a1; b1 a ready head; c1 a head that is the key's only message.
        expect(await discardPending("sig.a", ["a2", "b1", "c1"])).toEqual(["a2", "b1", "c1"]);
        expect(idsOf(await claimOf(store(), "w", T0 + 1))).toEqual(["b2"]);
        await store().settle([outcome(first[0]!, "delivered")], T0 + 2);
        expect(idsOf(await claimOf(store(), "w", T0 + 2))).toEqual(["a3"]);
        // A key emptied by the discard takes new messages as usual.
        await store().enqueue([msg("c2", { key: "z" })], T0 + 3);
        expect(idsOf(await claimOf(store(), "w", T0 + 3))).toEqual(["c2"]);
      });
    });

    it("stats counts each status and the oldest pending age at now", async () => {
      expect(await store().stats("sig.a", T0)).toEqual({
        signal: "sig.a",
        pending: 0,
        inflight: 0,
        dead: 0,
        delivered: 0,
        ...failedCount(0),
        oldestPendingAgeMs: null,
      });
      await store().enqueue([msg("m1")], T0);
      await store().enqueue([msg("m2"), msg("x1", { signal: "sig.b" })], T0 + 1_000);
      await store().enqueue([msg("m3"), msg("m4")], T0 + 2_000);
      expect(await store().stats("sig.a", T0 + 5_000)).toEqual({
        signal: "sig.a",
        pending: 4,
        inflight: 0,
        dead: 0,
        delivered: 0,
        ...failedCount(0),
        oldestPendingAgeMs: 5_000,
      });
      await kill(store(), "m2", T0 + 5_000);
      const got = await store().claim({
        signal: "sig.a",
        worker: "w",
        max: 100,
        now: T0 + 5_000,
        leaseMs: 1_000,
      });
      const byId = new Map(got.map((c) => [c.id, c]));
      await store().settle(
        [outcome(byId.get("m3")!, "delivered"), outcome(byId.get("m1")!, "pending")],
        T0 + 5_000,
      );
      // m1 pending (retried), m4 inflight, m2 dead, m3 delivered.
      expect(await store().stats("sig.a", T0 + 6_000)).toEqual({
        signal: "sig.a",
        pending: 1,
        inflight: 1,
        dead: 1,
        delivered: 1,
        ...failedCount(0),
        oldestPendingAgeMs: 6_000,
      });
      // An expired lease still counts as inflight until someone reclaims it.
      expect((await store().stats("sig.a", T0 + 60_000)).inflight).toBe(1);
      await claimOf(store(), "w", T0 + 6_000);
      expect((await store().stats("sig.a", T0 + 6_000)).oldestPendingAgeMs).toBeNull();
      expect((await store().stats("sig.b", T0 + 6_000)).pending).toBe(1);
    });

    it("stats' deliveredFailed counts the delivered messages with a failure, exactly, until they are pruned", async () => {
      if (options.deliveredFailed !== true) {
        // Optional in the contract: the Console then counts failed copies among the newest delivered.
        expect(await store().stats("sig.a", T0)).not.toHaveProperty("deliveredFailed");
        return;
      }
      const failure = (at: number) => ({ code: "Error", message: "handler failed", at });
      await store().enqueue([msg("c1"), msg("c2"), msg("c3"), msg("r1"), msg("x1", { signal: "sig.b" })], T0);
      const first = new Map((await claimOf(store(), "w", T0)).map((c) => [c.id, c]));
      const [x1] = await claimOf(store(), "w", T0, 100, "sig.b");
      // c1 and x1 delivered with their failure (a broadcast copy's one attempt), c2 cleanly, r1 retried.
      await store().settle(
        [
          outcome(first.get("c1")!, "delivered", failure(T0 + 1)),
          outcome(first.get("c2")!, "delivered"),
          outcome(first.get("r1")!, "pending", failure(T0 + 1)),
          outcome(x1!, "delivered", failure(T0 + 1)),
        ],
        T0 + 1,
      );
      expect(await store().stats("sig.a", T0 + 2)).toMatchObject({
        delivered: 2,
        deliveredFailed: 1,
        pending: 1,
      });
      expect(await store().stats("sig.b", T0 + 2)).toMatchObject({ delivered: 1, deliveredFailed: 1 });
      // r1 delivered on its second attempt: its first attempt's failure counts it.
      const [r1] = await claimOf(store(), "w", T0 + 10);
      expect(r1!.id).toBe("r1");
      await store().settle([outcome(r1!, "delivered"), outcome(first.get("c3")!, "delivered")], T0 + 20);
      expect(await store().stats("sig.a", T0 + 20)).toMatchObject({ delivered: 4, deliveredFailed: 2 });
      // Pruned with the rest of the delivered: the count follows.
      expect(await store().pruneDelivered(T0 + 2)).toBe(3);
      expect(await store().stats("sig.a", T0 + 20)).toMatchObject({ delivered: 2, deliveredFailed: 1 });
      expect(await store().stats("sig.b", T0 + 20)).toMatchObject({ delivered: 0, deliveredFailed: 0 });
    });

    it("nextLeaseExpiry is the earliest inflight lease of the signal, or null", async () => {
      expect(await store().nextLeaseExpiry("sig.a")).toBeNull();
      await store().enqueue([msg("m1"), msg("m2"), msg("x1", { signal: "sig.b" })], T0);
      await store().claim({ signal: "sig.b", worker: "w", max: 1, now: T0, leaseMs: 10 });
      await store().claim({ signal: "sig.a", worker: "w", max: 1, now: T0, leaseMs: 500 });
      await store().claim({ signal: "sig.a", worker: "w", max: 1, now: T0, leaseMs: 300 });
      expect(await store().nextLeaseExpiry("sig.a")).toBe(T0 + 300);
      expect(await store().nextLeaseExpiry("sig.b")).toBe(T0 + 10);
      // A reclaim moves the deadline.
      await store().claim({ signal: "sig.a", worker: "w2", max: 1, now: T0 + 300, leaseMs: 1_000 });
      expect(await store().nextLeaseExpiry("sig.a")).toBe(T0 + 500);
    });

    it("pruneDelivered deletes delivered messages last updated strictly before the cut-off", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3"), msg("m4"), msg("x1", { signal: "sig.b" })], T0);
      const a = await claimOf(store(), "w", T0);
      const b = await claimOf(store(), "w", T0, 100, "sig.b");
      const byId = new Map([...a, ...b].map((c) => [c.id, c]));
      await store().settle(
        [outcome(byId.get("m1")!, "delivered"), outcome(byId.get("x1")!, "delivered")],
        T0 + 10,
      );
      await store().settle([outcome(byId.get("m2")!, "delivered")], T0 + 20);
      await store().settle([outcome(byId.get("m3")!, "dead")], T0 + 5);
      expect(await store().pruneDelivered(T0 + 20)).toBe(2);
      expect(await store().getMessage("m1")).toBeUndefined();
      expect(await store().getMessage("x1")).toBeUndefined();
      expect(await store().getMessage("m2")).toMatchObject({ status: "delivered" });
      expect(await store().getMessage("m3")).toMatchObject({ status: "dead" });
      expect(await store().getMessage("m4")).toMatchObject({ status: "inflight" });
      expect((await store().stats("sig.a", T0 + 20)).delivered).toBe(1);
      expect(await store().pruneDelivered(T0 + 21)).toBe(1);
      expect(await store().pruneDelivered(T0 + 1_000)).toBe(0);
    });
  });
}
