/** Conformance cases of leaveClaimsToLease: a graceful stop's running claims keep their lease, and the claim after the lapse is the same attempt. */
import { describe, expect, it } from "vitest";
import type { ClaimedMessage, ClaimRelease, Store } from "../types.ts";
import {
  claimOf,
  freshStore,
  LEASE,
  msg,
  outcome,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** The mark of a claim, from its own holder and attempt. */
const mark = (c: ClaimedMessage): ClaimRelease => ({ id: c.id, worker: c.lockedBy, attempt: c.attempts });

/** `store.leaveClaimsToLease`, which every built-in driver has. */
const leave = (store: Store, claims: ClaimRelease[], now = T0 + 1): Promise<string[]> => {
  if (store.leaveClaimsToLease === undefined)
    throw new Error(`the ${store.driver} driver has no leaveClaimsToLease`);
  return store.leaveClaimsToLease(claims, now);
};

const LAPSED = T0 + LEASE;

/** leaveClaimsToLease: lease kept, holder renamed, attempt uncounted; the holder may still settle. */
export function leaveClaimsCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("queue: leaveClaimsToLease (a graceful stop's running claims)", () => {
    const store = freshStore(factory);
    if (options.leaveClaimsToLease !== true) {
      // Optional in the contract: without it each claim after a graceful stop's lapse counts an attempt.
      it("is absent when the driver does not claim it", () => {
        expect(Reflect.get(store(), "leaveClaimsToLease")).toBeUndefined();
      });
      return;
    }

    it("keeps the message inflight with its lease and expiry under `<worker>#stopped`; no claim takes it before the lapse", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      const [c1] = await claimOf(store(), "w1", T0, 1);
      expect(await leave(store(), [mark(c1!)])).toEqual(["m1"]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        lockedBy: "w1#stopped",
        attempts: 1,
        leaseExpiresAt: T0 + LEASE,
        updatedAt: T0 + 1,
      });
      // Before the lapse a claim gets the other message only; the next lease expiry is unchanged.
      expect(await claimOf(store(), "w2", LAPSED - 1)).toMatchObject([{ id: "m2" }]);
      expect(await store().nextLeaseExpiry("sig.a")).toBe(T0 + LEASE);
    });

    it("the claim after the lapse is the same attempt again, not the next one, and a later crash still counts", async () => {
      await store().enqueue([msg("m1")], T0);
      const [c1] = await claimOf(store(), "w1", T0);
      expect(c1).toMatchObject({ attempts: 1 });
      await leave(store(), [mark(c1!)]);
      const [again] = await claimOf(store(), "w2", LAPSED);
      expect(again).toMatchObject({ id: "m1", attempts: 1, lockedBy: "w2" });
      // w2 crashes (no mark): its lapse counts, as before.
      const [third] = await claimOf(store(), "w3", LAPSED + LEASE);
      expect(third).toMatchObject({ id: "m1", attempts: 2, lockedBy: "w3" });
      expect(await store().settle([outcome(third!, "delivered")], LAPSED + LEASE + 1)).toEqual({
        applied: ["m1"],
      });
    });

    it("the stopping holder may still settle it, fenced by (`<worker>#stopped`, attempt); the old fence no longer applies, and a failure it settles counts", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      const [c1, c2] = await claimOf(store(), "w1", T0);
      await leave(store(), [mark(c1!), mark(c2!)]);
      // Its pre-stop fence is gone: the claim is no longer (w1, 1).
      expect(await store().settle([outcome(c1!, "delivered")], T0 + 2)).toEqual({ applied: [] });
      const left = (c: ClaimedMessage): ClaimedMessage => ({ ...c, lockedBy: "w1#stopped" });
      expect(
        await store().settle(
          [
            outcome(left(c1!), "delivered"),
            outcome(left(c2!), "pending", { code: "E", message: "boom", at: T0 + 3 }),
          ],
          T0 + 3,
        ),
      ).toEqual({ applied: ["m1", "m2"] });
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered", attempts: 1 });
      // The attempt ran to its end (a failure): the next claim is the next attempt.
      expect(await claimOf(store(), "w2", T0 + 4)).toMatchObject([{ id: "m2", attempts: 2 }]);
    });

    it("a retry of the mark reports the same ids and writes nothing more; claims no longer held are left alone", async () => {
      await store().enqueue([msg("m1"), msg("m2"), msg("m3")], T0);
      const [c1, c2, c3] = await claimOf(store(), "w1", T0);
      await store().settle([outcome(c2!, "delivered")], T0);
      // The leases lapsed and w2 claimed m1 again (attempt 2): w1's claim of it is gone.
      const [r1] = await claimOf(store(), "w2", LAPSED, 1);
      expect(r1).toMatchObject({ id: "m1" });
      expect(await leave(store(), [mark(c3!), mark(c1!), mark(c2!), mark(c1!)], LAPSED)).toEqual(["m3"]);
      expect(await store().getMessage("m1")).toMatchObject({ lockedBy: "w2", attempts: 2 });
      expect(await store().getMessage("m2")).toMatchObject({ status: "delivered" });
      const marked = await store().getMessage("m3");
      expect(marked).toMatchObject({ lockedBy: "w1#stopped", attempts: 1, updatedAt: LAPSED });
      expect(await leave(store(), [mark(c3!)], LAPSED + 5)).toEqual(["m3"]);
      expect(await store().getMessage("m3")).toEqual(marked);
    });

    it("a keyed message left so still holds its key: its successor waits for the lapse and the same attempt's end", async () => {
      await store().enqueue([msg("k1", { key: "a" }), msg("k2", { key: "a" })], T0);
      const [c1] = await claimOf(store(), "w1", T0);
      expect(c1).toMatchObject({ id: "k1" });
      await leave(store(), [mark(c1!)]);
      expect(await claimOf(store(), "w2", LAPSED - 1)).toEqual([]);
      const [again] = await claimOf(store(), "w2", LAPSED);
      expect(again).toMatchObject({ id: "k1", attempts: 1 });
      await store().settle([outcome(again!, "delivered")], LAPSED + 1);
      expect(await claimOf(store(), "w2", LAPSED + 2)).toMatchObject([{ id: "k2", attempts: 1 }]);
    });
  });
}
