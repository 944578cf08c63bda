/** Conformance cases of per-key FIFO order. */
import { describe, expect, it } from "vitest";
import type { ClaimedMessage } from "../types.ts";
import {
  claimOf,
  drainInOrder,
  freshStore,
  idsOf,
  LEASE,
  msg,
  outcome,
  sortedIds,
  T0,
  type StoreFactory,
} from "./harness.ts";

/** Per-key FIFO: the lease is the lock; emit order per (signal, key). */
export function fifoCases(factory: StoreFactory): void {
  describe("per-key FIFO", () => {
    const store = freshStore(factory);

    it("never has two messages of one (signal, key) inflight", async () => {
      await store().enqueue(
        [msg("k1-1", { key: "k1" }), msg("k1-2", { key: "k1" }), msg("k1-3", { key: "k1" })],
        T0,
      );
      expect(idsOf(await claimOf(store(), "w1", T0, 10))).toEqual(["k1-1"]);
      expect(await claimOf(store(), "w2", T0, 10)).toEqual([]);
    });

    it("delivers each key in emit order, across enqueue calls and within one", async () => {
      await store().enqueue([msg("a1", { key: "a" }), msg("b1", { key: "b" }), msg("a2", { key: "a" })], T0);
      await store().enqueue([msg("a3", { key: "a" })], T0 + 1);
      await store().enqueue([msg("b2", { key: "b" }), msg("a4", { key: "a" })], T0 + 2);
      const order = await drainInOrder(store(), T0 + 3);
      expect(order.filter((id) => id.startsWith("a"))).toEqual(["a1", "a2", "a3", "a4"]);
      expect(order.filter((id) => id.startsWith("b"))).toEqual(["b1", "b2"]);
    });

    it("a retried message is claimed again before its successors", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" })], T0);
      const [first] = await claimOf(store(), "w1", T0);
      await store().settle([outcome(first!, "pending", { code: "Error", message: "boom", at: T0 })], T0);
      const again = await claimOf(store(), "w2", T0, 10);
      expect(again).toMatchObject([{ id: "m1", attempts: 2 }]);
    });

    it("different keys and unkeyed messages are claimed in parallel", async () => {
      await store().enqueue(
        [
          msg("a1", { key: "a" }),
          msg("a2", { key: "a" }),
          msg("b1", { key: "b" }),
          msg("b2", { key: "b" }),
          msg("u1"),
          msg("u2"),
        ],
        T0,
      );
      expect(sortedIds(await claimOf(store(), "w", T0, 10))).toEqual(["a1", "b1", "u1", "u2"]);
    });

    it("an expired lease on a key's head makes that head reclaimable, not its successor", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" })], T0);
      await store().claim({ signal: "sig.a", worker: "w1", max: 10, now: T0, leaseMs: 100 });
      expect(await claimOf(store(), "w2", T0 + 99, 10)).toEqual([]);
      const got = await store().claim({
        signal: "sig.a",
        worker: "w2",
        max: 10,
        now: T0 + 100,
        leaseMs: 100,
      });
      expect(got).toMatchObject([{ id: "m1", attempts: 2, lockedBy: "w2" }]);
      expect(await store().getMessage("m2")).toMatchObject({ status: "pending", attempts: 0 });
    });

    it("a head that dies or is delivered releases the key to its successor", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" }), msg("m3", { key: "k" })], T0);
      const [m1] = await claimOf(store(), "w", T0);
      await store().settle([outcome(m1!, "dead", { code: "Error", message: "fatal", at: T0 })], T0);
      const [m2] = await claimOf(store(), "w", T0);
      expect(m2?.id).toBe("m2");
      await store().settle([outcome(m2!, "delivered")], T0);
      expect(idsOf(await claimOf(store(), "w", T0))).toEqual(["m3"]);
    });

    it("the same key on two signals is two independent partitions", async () => {
      await store().enqueue([msg("a1", { key: "k" }), msg("b1", { key: "k", signal: "sig.b" })], T0);
      expect(idsOf(await claimOf(store(), "w", T0, 10, "sig.a"))).toEqual(["a1"]);
      expect(idsOf(await claimOf(store(), "w", T0, 10, "sig.b"))).toEqual(["b1"]);
    });

    it("concurrent claimers keep one inflight per key and emit order per key", async () => {
      const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
      const emitted: string[] = [];
      for (let n = 0; n < 5; n++) {
        for (const k of keys) emitted.push(`${k}/${n}`);
      }
      emitted.push("u/0", "u/1", "u/2");
      await store().enqueue(
        emitted.map((id) => msg(id, { key: id.startsWith("u/") ? null : id.split("/")[0]! })),
        T0,
      );
      const delivered: string[] = [];
      let now = T0;
      for (let round = 0; round < 100; round++) {
        now += 1;
        const batches = await Promise.all(
          [1, 2, 3, 4, 5].map((w) =>
            store().claim({ signal: "sig.a", worker: `w${w}`, max: 4, now, leaseMs: LEASE }),
          ),
        );
        const got: ClaimedMessage[] = batches.flat();
        if (got.length === 0) break;
        const keyed = got.filter((c) => c.key !== null).map((c) => c.key);
        expect(new Set(keyed).size).toBe(keyed.length);
        // Fail every third first attempt so retries interleave with fresh heads.
        const settlements = got.map((c) =>
          c.attempts === 1 && delivered.length % 3 === 0 && c.id.endsWith("/1")
            ? outcome(c, "pending", { code: "Error", message: "flaky", at: now })
            : outcome(c, "delivered"),
        );
        for (const s of settlements) if (s.status === "delivered") delivered.push(s.id);
        const res = await store().settle(settlements, now);
        expect(res.applied).toHaveLength(got.length);
      }
      expect([...delivered].sort()).toEqual([...emitted].sort());
      for (const k of keys) {
        expect(delivered.filter((id) => id.startsWith(`${k}/`))).toEqual(
          [0, 1, 2, 3, 4].map((n) => `${k}/${n}`),
        );
      }
    });
  });
}
