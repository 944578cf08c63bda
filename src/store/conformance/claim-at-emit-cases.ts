/** Conformance cases of the optional enqueueClaimed (claim at emit). */
import { describe, expect, it } from "vitest";
import {
  claimOf,
  freshStore,
  LEASE,
  msg,
  outcome,
  recordEvents,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** The optional `enqueueClaimed` (claim at emit): checked where a driver has it, absent otherwise. */
export function claimAtEmitCases(factory: StoreFactory, options: ConformanceOptions): void {
  describe("claim at emit (enqueueClaimed)", () => {
    const store = freshStore(factory);

    if (options.claimAtEmit !== true) {
      it("is absent, so the app claims through the queue", () => {
        expect("enqueueClaimed" in store()).toBe(false);
      });
      return;
    }

    const claimAtEmit = (...args: Parameters<NonNullable<ReturnType<typeof store>["enqueueClaimed"]>>) =>
      store().enqueueClaimed!(...args);

    it("writes the messages inflight at attempt 1, held by the worker, and returns them", async () => {
      const got = await claimAtEmit([msg("m1"), msg("m2")], T0, { worker: "w1", leaseMs: LEASE });
      expect(got).toEqual([
        {
          id: "m1",
          signal: "sig.a",
          key: null,
          payload: { id: "m1" },
          parentRunId: null,
          attempts: 1,
          createdAt: T0,
          lockedBy: "w1",
          leaseExpiresAt: T0 + LEASE,
        },
        expect.objectContaining({ id: "m2", attempts: 1, lockedBy: "w1", leaseExpiresAt: T0 + LEASE }),
      ]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        attempts: 1,
        lockedBy: "w1",
        leaseExpiresAt: T0 + LEASE,
      });
      expect(await store().stats("sig.a", T0)).toMatchObject({ pending: 0, inflight: 2 });
    });

    it("nobody else claims them while the lease lives; after it lapses they are reclaimed (attempt 2)", async () => {
      await claimAtEmit([msg("m1")], T0, { worker: "w1", leaseMs: LEASE });
      expect(await claimOf(store(), "w2", T0 + LEASE - 1)).toEqual([]);
      const [again] = await claimOf(store(), "w2", T0 + LEASE);
      expect(again).toMatchObject({ id: "m1", attempts: 2, lockedBy: "w2" });
      // The first holder was fenced off by the reclaim.
      const late = await store().settle(
        [{ id: "m1", worker: "w1", attempt: 1, status: "delivered" }],
        T0 + LEASE + 1,
      );
      expect(late.applied).toEqual([]);
      expect(await store().settle([outcome(again!, "delivered")], T0 + LEASE + 2)).toEqual({
        applied: ["m1"],
      });
    });

    it("the holder settles them like any claim, retries included", async () => {
      const [c] = await claimAtEmit([msg("m1")], T0, { worker: "w1", leaseMs: LEASE });
      await store().settle([outcome(c!, "pending", { code: "Error", message: "boom", at: T0 + 1 })], T0 + 1);
      const [retry] = await claimOf(store(), "w1", T0 + 1);
      expect(retry).toMatchObject({ id: "m1", attempts: 2 });
      expect(await store().getMessage("m1")).toMatchObject({
        failures: [{ code: "Error", message: "boom", at: T0 + 1, attempt: 1 }],
      });
    });

    it("announces nothing: no other worker is woken for a message it may not take", async () => {
      const rec = recordEvents(store());
      await claimAtEmit([msg("m1")], T0, { worker: "w1", leaseMs: LEASE });
      await store().enqueue([msg("marker", { signal: "sig.marker" })], T0);
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.marker");
      expect(rec.events.filter((e) => e.kind === "enqueued" && e.signal === "sig.a")).toEqual([]);
      rec.stop();
    });

    it("refuses keyed messages (OKE1262) and writes none of the batch", async () => {
      await expect(
        claimAtEmit([msg("m1"), msg("k1", { key: "k" })], T0, { worker: "w1", leaseMs: LEASE }),
      ).rejects.toMatchObject({
        code: "OKE1262",
        message: 'store: message "k1" has a key and cannot be claimed at emit',
      });
      expect(await store().getMessage("m1")).toBeUndefined();
      expect(await store().getMessage("k1")).toBeUndefined();
    });

    it("a duplicate id fails that call only (OKE1261); concurrent emits still commit", async () => {
      await store().enqueue([msg("m1")], T0);
      const results = await Promise.allSettled([
        claimAtEmit([msg("m1")], T0, { worker: "w1", leaseMs: LEASE }),
        claimAtEmit([msg("m2")], T0, { worker: "w1", leaseMs: LEASE }),
        store().enqueue([msg("m3")], T0),
      ]);
      expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "fulfilled"]);
      expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ code: "OKE1261" });
      expect(await store().getMessage("m1")).toMatchObject({ status: "pending", attempts: 0 });
      expect(await store().getMessage("m2")).toMatchObject({ status: "inflight", lockedBy: "w1" });
      expect(await store().getMessage("m3")).toMatchObject({ status: "pending" });
    });
  });
}
