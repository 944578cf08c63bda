/** Conformance cases of releaseClaimed: a claim its holder never started, given back as if never made. */
import { describe, expect, it } from "vitest";
import type { ClaimedMessage, ClaimRelease } from "../types.ts";
import {
  claimOf,
  freshStore,
  idsOf,
  LEASE,
  msg,
  outcome,
  recordEvents,
  T0,
  type StoreFactory,
} from "./harness.ts";

/** The release of a claim, from its own holder and attempt. */
const release = (c: ClaimedMessage): ClaimRelease => ({ id: c.id, worker: c.lockedBy, attempt: c.attempts });

/** releaseClaimed: back to pending with the attempt uncounted, fenced by (worker, attempt), keyed order kept. */
export function releaseCases(factory: StoreFactory): void {
  describe("releaseClaimed", () => {
    const store = freshStore(factory);

    it("puts the message back to pending with its attempt uncounted: the next claim, by anyone, is the same attempt", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      const [c1, c2] = await claimOf(store(), "w1", T0);
      expect(await store().releaseClaimed([release(c2!), release(c1!)], T0 + 5)).toEqual(["m2", "m1"]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "pending",
        attempts: 0,
        lockedBy: null,
        leaseExpiresAt: null,
        updatedAt: T0 + 5,
        failures: [],
      });
      // Claimable at once (no lease to wait for), in emit order, as attempt 1 again.
      const again = await claimOf(store(), "w2", T0 + 6);
      expect(again).toMatchObject([
        { id: "m1", attempts: 1, lockedBy: "w2" },
        { id: "m2", attempts: 1, lockedBy: "w2" },
      ]);
      expect(await store().settle([outcome(again[0]!, "delivered")], T0 + 7)).toEqual({ applied: ["m1"] });
    });

    it("a message on a later attempt is claimed next as that attempt (N), not N + 1", async () => {
      await store().enqueue([msg("m1")], T0);
      const [a1] = await claimOf(store(), "w1", T0);
      await store().settle([outcome(a1!, "pending", { code: "Error", message: "boom", at: T0 })], T0);
      const [a2] = await claimOf(store(), "w1", T0 + 1);
      expect(a2).toMatchObject({ id: "m1", attempts: 2 });
      expect(await store().releaseClaimed([release(a2!)], T0 + 2)).toEqual(["m1"]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "pending", attempts: 1 });
      // The failure of attempt 1 is kept; the release records none.
      expect((await store().getMessage("m1"))!.failures).toHaveLength(1);
      expect(await claimOf(store(), "w2", T0 + 3)).toMatchObject([{ id: "m1", attempts: 2, lockedBy: "w2" }]);
    });

    it("a last attempt released and claimed again is still that last attempt, and settles as delivered", async () => {
      // A budget of 3 attempts: two lapsed leases, then the third claim — released unstarted.
      await store().enqueue([msg("m1")], T0);
      await claimOf(store(), "w1", T0);
      await claimOf(store(), "w1", T0 + LEASE);
      const [third] = await claimOf(store(), "w1", T0 + 2 * LEASE);
      expect(third).toMatchObject({ attempts: 3 });
      expect(await store().releaseClaimed([release(third!)], T0 + 2 * LEASE + 1)).toEqual(["m1"]);
      const [again] = await claimOf(store(), "w2", T0 + 2 * LEASE + 2);
      // Still within the budget (3), so a worker runs it rather than settling it spent.
      expect(again).toMatchObject({ id: "m1", attempts: 3, lockedBy: "w2" });
      expect(await store().settle([outcome(again!, "delivered")], T0 + 2 * LEASE + 3)).toEqual({
        applied: ["m1"],
      });
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered", attempts: 3 });
    });

    it("leaves alone a message its caller no longer holds: reclaimed by another worker, another attempt, settled", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3")], T0);
      const [c1, c2, c3] = await claimOf(store(), "w1", T0);
      // m1's lease lapsed and w2 claimed it again (attempt 2).
      const [r1] = await claimOf(store(), "w2", T0 + LEASE, 1);
      expect(r1).toMatchObject({ id: "m1", attempts: 2, lockedBy: "w2" });
      await store().settle([outcome(c3!, "delivered")], T0 + LEASE);
      const released = await store().releaseClaimed(
        [
          release(c1!), // w1's claim of m1: now w2's
          { ...release(c2!), worker: "w9" }, // not w9's
          { ...release(c2!), attempt: c2!.attempts + 1 }, // not that attempt
          release(c3!), // settled already
        ],
        T0 + LEASE + 1,
      );
      expect(released).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        attempts: 2,
        lockedBy: "w2",
      });
      expect(await store().getMessage("m2")).toMatchObject({
        status: "inflight",
        attempts: 1,
        lockedBy: "w1",
      });
      expect(await store().getMessage("m3")).toMatchObject({ status: "delivered", attempts: 1 });
      // w2's settle still applies: the stale release changed nothing.
      expect(await store().settle([outcome(r1!, "delivered")], T0 + LEASE + 2)).toEqual({ applied: ["m1"] });
      // A repeated release applies once.
      expect(await store().releaseClaimed([release(c2!), release(c2!)], T0 + LEASE + 3)).toEqual(["m2"]);
      expect(await store().getMessage("m2")).toMatchObject({ status: "pending", attempts: 0 });
    });

    it("a keyed message stays its key's head: claimed again before its successors, and blocks them meanwhile", async () => {
      await store().enqueue(
        [msg("k1", { key: "k" }), msg("k2", { key: "k" }), msg("k3", { key: "k" }), msg("u1")],
        T0,
      );
      const first = await claimOf(store(), "w1", T0);
      expect(idsOf(first)).toEqual(["k1", "u1"]);
      expect(await store().releaseClaimed([release(first[0]!)], T0 + 1)).toEqual(["k1"]);
      // The key's head is k1 again (not k2), claimed once, as attempt 1.
      expect(await claimOf(store(), "w2", T0 + 2)).toMatchObject([{ id: "k1", attempts: 1, lockedBy: "w2" }]);
      expect(await claimOf(store(), "w3", T0 + 2)).toEqual([]);
      expect(await store().getMessage("k1")).toMatchObject({ status: "inflight", lockedBy: "w2" });
      await store().settle([{ id: "k1", worker: "w2", attempt: 1, status: "delivered" }], T0 + 3);
      // Then the rest of the key, in emit order, one at a time.
      const order: string[] = [];
      for (let now = T0 + 4; ; now++) {
        const got = await claimOf(store(), "w2", now, 10);
        if (got.length === 0) break;
        expect(got).toHaveLength(1);
        order.push(got[0]!.id);
        await store().settle([outcome(got[0]!, "delivered")], now);
      }
      expect(order).toEqual(["k2", "k3"]);
    });

    it("announces the signals it made work claimable in, as a settle does", async () => {
      await store().enqueue([msg("a1"), msg("b1", { signal: "sig.b" })], T0);
      const [a] = await claimOf(store(), "w1", T0);
      const [b] = await claimOf(store(), "w1", T0, 100, "sig.b");
      const rec = recordEvents(store());
      expect(await store().releaseClaimed([release(a!), release(b!)], T0 + 1)).toEqual(["a1", "b1"]);
      await rec.next((e) => e.kind === "settled" && e.signal === "sig.a");
      await rec.next((e) => e.kind === "settled" && e.signal === "sig.b");
      rec.stop();
    });

    it("an empty or fully fenced release changes nothing", async () => {
      expect(await store().releaseClaimed([], T0)).toEqual([]);
      expect(await store().releaseClaimed([{ id: "nope", worker: "w1", attempt: 1 }], T0)).toEqual([]);
      expect(await store().getMessage("nope")).toBeUndefined();
    });
  });
}
