/** Conformance cases of settle: outcomes, failure history, fencing by (worker, attempt). */
import { describe, expect, it } from "vitest";
import { claimOf, freshStore, idsOf, msg, outcome, T0, type StoreFactory } from "./harness.ts";

/** Settle: outcomes, failure history, and fencing by (worker, attempt). */
export function settleCases(factory: StoreFactory): void {
  describe("settle and fencing", () => {
    const store = freshStore(factory);

    it("delivered: clears the lock, stamps updatedAt, and the message is never claimed again", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c] = await claimOf(store(), "w1", T0);
      expect(await store().settle([outcome(c!, "delivered")], T0 + 7)).toEqual({ applied: ["m1"] });
      expect(await store().getMessage("m1")).toMatchObject({
        status: "delivered",
        attempts: 1,
        lockedBy: null,
        leaseExpiresAt: null,
        updatedAt: T0 + 7,
      });
      expect(await claimOf(store(), "w2", T0 + 10 * 60_000)).toEqual([]);
    });

    it("a batch of deliveries reports what it applied in the caller's order: all, or all but the fenced and repeated", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3"), msg("m4"), msg("m5")], T0);
      const [c1, c2, c3, c4, c5] = await claimOf(store(), "w1", T0);
      // Every one applied (the lean statement on postgres answers without listing them).
      expect(await store().settle([outcome(c3!, "delivered"), outcome(c1!, "delivered")], T0 + 1)).toEqual({
        applied: ["m3", "m1"],
      });
      // A stale attempt, a repeat and one settled already: only m5 and m4 apply; then another holder's.
      const res = await store().settle(
        [
          outcome(c5!, "delivered"),
          { ...outcome(c2!, "delivered"), attempt: c2!.attempts + 1 },
          outcome(c1!, "delivered"),
          outcome(c4!, "delivered"),
          outcome(c5!, "delivered"),
        ],
        T0 + 2,
      );
      expect(res.applied).toEqual(["m5", "m4"]);
      const other = await store().settle(
        [
          { ...outcome(c2!, "delivered"), worker: "w9" },
          { ...outcome(c2!, "delivered"), worker: "w9" },
        ],
        T0 + 3,
      );
      expect(other.applied).toEqual([]);
      expect(await store().getMessage("m2")).toMatchObject({ status: "inflight", lockedBy: "w1" });
      expect(await store().getMessage("m4")).toMatchObject({ status: "delivered", updatedAt: T0 + 2 });
    });

    it("retry (pending) appends the failure and is claimable again at once", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c1] = await claimOf(store(), "w1", T0);
      await store().settle(
        [outcome(c1!, "pending", { code: "OKE9999", message: "first", at: T0 + 1 })],
        T0 + 1,
      );
      expect(await store().getMessage("m1")).toMatchObject({
        status: "pending",
        attempts: 1,
        lockedBy: null,
        leaseExpiresAt: null,
        failures: [{ code: "OKE9999", message: "first", at: T0 + 1, attempt: 1 }],
      });
      const [c2] = await claimOf(store(), "w2", T0 + 1);
      expect(c2).toMatchObject({ id: "m1", attempts: 2, lockedBy: "w2" });
      await store().settle(
        [outcome(c2!, "pending", { code: "Error", message: "second", at: T0 + 2 })],
        T0 + 2,
      );
      expect((await store().getMessage("m1"))!.failures).toEqual([
        { code: "OKE9999", message: "first", at: T0 + 1, attempt: 1 },
        { code: "Error", message: "second", at: T0 + 2, attempt: 2 },
      ]);
    });

    it("dead: keeps attempts and failures and is not claimable", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c] = await claimOf(store(), "w1", T0);
      await store().settle([outcome(c!, "dead", { code: "Error", message: "gave up", at: T0 })], T0);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "dead",
        attempts: 1,
        lockedBy: null,
        leaseExpiresAt: null,
        failures: [{ code: "Error", message: "gave up", at: T0, attempt: 1 }],
      });
      expect(await claimOf(store(), "w2", T0 + 10 * 60_000)).toEqual([]);
    });

    it("delivered with a failure (deadLetter: false) records it and lands outside the DLQ", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c] = await claimOf(store(), "w1", T0);
      await store().settle([outcome(c!, "delivered", { code: "Error", message: "last try", at: T0 })], T0);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "delivered",
        failures: [{ code: "Error", message: "last try", at: T0, attempt: 1 }],
      });
      expect(await store().deadLetters("sig.a")).toEqual([]);
    });

    it("a holder whose lease was reclaimed by another worker changes nothing", async () => {
      await store().enqueue([msg("m1")], T0);
      const [old] = await store().claim({ signal: "sig.a", worker: "w1", max: 1, now: T0, leaseMs: 100 });
      const [cur] = await store().claim({
        signal: "sig.a",
        worker: "w2",
        max: 1,
        now: T0 + 100,
        leaseMs: 100,
      });
      expect(cur).toMatchObject({ id: "m1", attempts: 2 });
      const res = await store().settle(
        [outcome(old!, "dead", { code: "Error", message: "late", at: T0 + 150 })],
        T0 + 150,
      );
      expect(res.applied).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        lockedBy: "w2",
        attempts: 2,
        leaseExpiresAt: T0 + 200,
        failures: [],
      });
      expect((await store().settle([outcome(cur!, "delivered")], T0 + 150)).applied).toEqual(["m1"]);
    });

    it("fencing is by attempt too: the same worker id's earlier attempt is refused", async () => {
      await store().enqueue([msg("m1")], T0);
      const [first] = await store().claim({ signal: "sig.a", worker: "w1", max: 1, now: T0, leaseMs: 100 });
      const [second] = await store().claim({
        signal: "sig.a",
        worker: "w1",
        max: 1,
        now: T0 + 100,
        leaseMs: 100,
      });
      expect(second).toMatchObject({ lockedBy: "w1", attempts: 2 });
      const stale = await store().settle(
        [outcome(first!, "pending", { code: "Error", message: "stale", at: T0 + 101 })],
        T0 + 101,
      );
      expect(stale.applied).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "inflight", attempts: 2, failures: [] });
      expect((await store().settle([outcome(second!, "delivered")], T0 + 101)).applied).toEqual(["m1"]);
    });

    it("a holder whose lease expired but was not reclaimed may still settle", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c] = await store().claim({ signal: "sig.a", worker: "w1", max: 1, now: T0, leaseMs: 100 });
      expect((await store().settle([outcome(c!, "delivered")], T0 + 5_000)).applied).toEqual(["m1"]);
      expect(await claimOf(store(), "w2", T0 + 5_000)).toEqual([]);
    });

    it("unknown ids, double settles and wrong workers are not applied; valid ones in the batch are", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3")], T0);
      const got = await claimOf(store(), "w1", T0);
      const byId = new Map(got.map((c) => [c.id, c]));
      await store().settle([outcome(byId.get("m3")!, "delivered")], T0);
      const res = await store().settle(
        [
          outcome(byId.get("m1")!, "delivered"),
          { ...outcome(byId.get("m2")!, "delivered"), worker: "intruder" },
          outcome(byId.get("m3")!, "dead"),
          { id: "ghost", worker: "w1", attempt: 1, status: "delivered" },
        ],
        T0,
      );
      expect(res.applied).toEqual(["m1"]);
      expect(await store().getMessage("m2")).toMatchObject({ status: "inflight", lockedBy: "w1" });
      expect(await store().getMessage("m3")).toMatchObject({ status: "delivered" });
    });

    it("an all-delivered batch from one worker is fenced row by row too (stale attempt, repeats, unknown ids)", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3")], T0);
      const [s1] = await store().claim({ signal: "sig.a", worker: "w1", max: 1, now: T0, leaseMs: 100 });
      // m1 is reclaimed by the same worker id: its attempt 1 is stale now.
      const got = await store().claim({ signal: "sig.a", worker: "w1", max: 3, now: T0 + 100, leaseMs: 100 });
      const byId = new Map(got.map((c) => [c.id, c]));
      expect(byId.get("m1")).toMatchObject({ attempts: 2 });
      const res = await store().settle(
        [
          outcome(s1!, "delivered"),
          outcome(byId.get("m2")!, "delivered"),
          outcome(byId.get("m2")!, "delivered"),
          { id: "ghost", worker: "w1", attempt: 1, status: "delivered" },
          outcome(byId.get("m3")!, "delivered"),
        ],
        T0 + 101,
      );
      expect(res.applied).toEqual(["m2", "m3"]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "inflight", attempts: 2 });
      expect(await store().getMessage("m2")).toMatchObject({ status: "delivered", updatedAt: T0 + 101 });
      expect((await store().settle([outcome(byId.get("m1")!, "delivered")], T0 + 102)).applied).toEqual([
        "m1",
      ]);
    });

    it("a settled message no longer counts for the next lease expiry", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      const [a] = await store().claim({ signal: "sig.a", worker: "w", max: 1, now: T0, leaseMs: 100 });
      const [b] = await store().claim({ signal: "sig.a", worker: "w", max: 1, now: T0 + 10, leaseMs: 100 });
      expect(await store().nextLeaseExpiry("sig.a")).toBe(T0 + 100);
      await store().settle([outcome(a!, "delivered")], T0 + 20);
      expect(await store().nextLeaseExpiry("sig.a")).toBe(T0 + 110);
      await store().settle([outcome(b!, "pending")], T0 + 20);
      expect(await store().nextLeaseExpiry("sig.a")).toBeNull();
      expect(idsOf(await claimOf(store(), "w", T0 + 20))).toEqual([b!.id]);
    });
  });
}
