/** Conformance cases of resettleDelivered: a delivered message settled again (a durable consumer's run failed after its park). */
import { describe, expect, it } from "vitest";
import type { FailureReason, ResettleDelivered, Store } from "../types.ts";
import {
  claimOf,
  freshStore,
  idsOf,
  msg,
  outcome,
  recordEvents,
  sleepingRun,
  startRun,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** `store.resettleDelivered`, which every built-in driver has. */
const resettle = (store: Store, req: ResettleDelivered, now = T0 + 100): Promise<boolean> => {
  if (store.resettleDelivered === undefined)
    throw new Error(`the ${store.driver} driver has no resettleDelivered`);
  return store.resettleDelivered(req, now);
};

const failure = (attempt: number, at = T0 + 100): FailureReason => ({
  code: "Error",
  message: "upstream 503",
  at,
  attempt,
});

/** Enqueues `id` (with `key`), claims it once and settles it delivered, as a consumer's park does. */
async function delivered(store: Store, id: string, key: string | null = null): Promise<void> {
  await store.enqueue([msg(id, { key })], T0);
  const [c] = await claimOf(store, "w1", T0 + 1, 1);
  expect(c).toMatchObject({ id, attempts: 1 });
  expect((await store.settle([outcome(c!, "delivered")], T0 + 2)).applied).toEqual([id]);
}

const back = (id: string, status: ResettleDelivered["status"], key: string | null = null) => ({
  message: msg(id, { key }),
  attempts: 1,
  status,
  failure: failure(1),
});

export function resettleCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("queue: resettleDelivered (a delivered message settled again)", () => {
    const store = freshStore(factory);
    if (options.resettleDelivered !== true) {
      // Optional in the contract: without it a consumer's run failing after its park stays failed.
      it("is absent when the driver does not claim it", () => {
        expect(Reflect.get(store(), "resettleDelivered")).toBeUndefined();
      });
      return;
    }

    it("back to pending: the failure appended, attempts kept; the next claim is the next attempt; a retry of the call writes nothing more", async () => {
      await delivered(store(), "m1");
      expect(await resettle(store(), back("m1", "pending"))).toBe(true);
      const m = await store().getMessage("m1");
      expect(m).toMatchObject({
        status: "pending",
        attempts: 1,
        failures: [failure(1)],
        lockedBy: null,
        leaseExpiresAt: null,
        createdAt: T0,
        updatedAt: T0 + 100,
      });
      expect(await store().stats("sig.a", T0 + 100)).toMatchObject({ pending: 1, delivered: 0 });
      // The same call again (its reply was lost): reported done, nothing appended twice.
      expect(await resettle(store(), back("m1", "pending"), T0 + 150)).toBe(true);
      expect((await store().getMessage("m1"))?.failures).toEqual([failure(1)]);
      const [again] = await claimOf(store(), "w2", T0 + 200);
      expect(again).toMatchObject({ id: "m1", attempts: 2, payload: { id: "m1" } });
    });

    it("is fenced: a message claimed since, one delivered at another attempt, and one never delivered are left alone", async () => {
      await delivered(store(), "m1");
      expect(await resettle(store(), back("m1", "pending"))).toBe(true);
      await claimOf(store(), "w2", T0 + 200);
      // Claimed again (attempt 2): the call's retry finds another holder's claim and writes nothing.
      expect(await resettle(store(), back("m1", "pending"), T0 + 300)).toBe(false);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        attempts: 2,
        lockedBy: "w2",
      });
      // Another failure of the delivered attempt 1 after it was claimed as attempt 2: fenced too.
      expect(await resettle(store(), { ...back("m1", "pending"), failure: failure(1, T0 + 301) })).toBe(
        false,
      );
      // Pending, never delivered: not this call's to settle.
      await store().enqueue([msg("m2")], T0);
      expect(await resettle(store(), back("m2", "dead"))).toBe(false);
      expect(await store().getMessage("m2")).toMatchObject({ status: "pending", failures: [] });
    });

    it("dead: listed among the dead letters and replayed like any; delivered keeps it delivered with the failure", async () => {
      await delivered(store(), "m1");
      await delivered(store(), "m2");
      expect(await resettle(store(), back("m1", "dead"))).toBe(true);
      expect(await resettle(store(), back("m2", "delivered"))).toBe(true);
      expect(await resettle(store(), back("m2", "delivered"))).toBe(true);
      expect(idsOf(await store().deadLetters("sig.a"))).toEqual(["m1"]);
      expect(await store().getMessage("m2")).toMatchObject({ status: "delivered", failures: [failure(1)] });
      expect(await store().stats("sig.a", T0 + 100)).toMatchObject({
        dead: 1,
        delivered: 1,
        pending: 0,
        // m2 delivered again with the failure: it counts among the failed (m1, dead, does not).
        ...(options.deliveredFailed === true ? { deliveredFailed: 1 } : {}),
      });
      expect(await claimOf(store(), "w2", T0 + 200)).toEqual([]);
      expect(await store().replay("sig.a", ["m1"], T0 + 300)).toEqual(["m1"]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "pending", attempts: 0, replays: 1 });
    });

    it("recreates a message retention pruned, from the message given, with its attempts, failure and replays", async () => {
      await delivered(store(), "m1", "k");
      expect(await store().pruneDelivered(T0 + 3)).toBe(1);
      expect(await store().getMessage("m1")).toBeUndefined();
      const req = { ...back("m1", "pending", "k"), attempts: 2, failure: failure(2), replays: 1 };
      expect(await resettle(store(), req)).toBe(true);
      expect(await store().getMessage("m1")).toMatchObject({
        id: "m1",
        signal: "sig.a",
        key: "k",
        payload: { id: "m1" },
        status: "pending",
        attempts: 2,
        failures: [failure(2)],
        replays: 1,
      });
      expect(await resettle(store(), req, T0 + 150)).toBe(true);
      expect((await store().getMessage("m1"))?.failures).toHaveLength(1);
      expect(await claimOf(store(), "w2", T0 + 200)).toMatchObject([{ id: "m1", attempts: 3 }]);
      // Recreated dead: a dead letter like any.
      await delivered(store(), "m2");
      await store().pruneDelivered(T0 + 3);
      expect(await resettle(store(), back("m2", "dead"))).toBe(true);
      expect(idsOf(await store().deadLetters("sig.a"))).toEqual(["m2"]);
    });

    it("a keyed message rejoins its key where it was emitted: after the key's inflight message, before its later pending ones", async () => {
      await store().enqueue([msg("k1", { key: "k" }), msg("k2", { key: "k" }), msg("k3", { key: "k" })], T0);
      const [c1] = await claimOf(store(), "w1", T0 + 1, 1);
      await store().settle([outcome(c1!, "delivered")], T0 + 2);
      const [c2] = await claimOf(store(), "w1", T0 + 3, 1);
      expect(c2).toMatchObject({ id: "k2" });
      expect(await resettle(store(), back("k1", "pending", "k"))).toBe(true);
      // k2 still holds the key: nothing of it is claimable.
      expect(await claimOf(store(), "w2", T0 + 200)).toEqual([]);
      await store().settle([outcome(c2!, "delivered")], T0 + 201);
      const [next] = await claimOf(store(), "w2", T0 + 202, 1);
      expect(next).toMatchObject({ id: "k1", attempts: 2 });
      expect(await claimOf(store(), "w2", T0 + 203)).toEqual([]);
      await store().settle([outcome(next!, "delivered")], T0 + 204);
      expect(idsOf(await claimOf(store(), "w2", T0 + 205))).toEqual(["k3"]);
    });

    it("pruneDelivered keeps a delivered message while its consumer's run (its id, or its replay's `<id>.r<n>`) is unfinished", async () => {
      await delivered(store(), "m1");
      await delivered(store(), "m2");
      await delivered(store(), "m3");
      await sleepingRun(store(), "m1", T0 + 3_600_000);
      await startRun(store(), "m2", { owner: "inst-2" });
      await store().finish({ runId: "m2", owner: "inst-2", now: T0 + 3, status: "completed" });
      // m3 was replayed once: its delivery's run is m3.r1, parked.
      await resettle(store(), back("m3", "dead"));
      expect(await store().replay("sig.a", ["m3"], T0 + 4)).toEqual(["m3"]);
      const [c3] = await claimOf(store(), "w1", T0 + 5);
      await store().settle([outcome(c3!, "delivered")], T0 + 6);
      await sleepingRun(store(), "m3.r1", T0 + 3_600_000, { now: T0 + 6 });
      expect(await store().pruneDelivered(T0 + 1_000)).toBe(1);
      expect(await store().getMessage("m2")).toBeUndefined();
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered" });
      expect(await store().getMessage("m3")).toMatchObject({ status: "delivered", replays: 1 });
      // Ended: pruned as any delivered message.
      const [r] = await store().claimDueRuns({
        owner: "inst-3",
        now: T0 + 3_600_000,
        max: 1,
        leaseMs: 30_000,
        runIds: ["m1"],
      });
      expect(r?.run.id).toBe("m1");
      await store().finish({ runId: "m1", owner: "inst-3", now: T0 + 3_600_001, status: "completed" });
      expect(await store().pruneDelivered(T0 + 1_000)).toBe(1);
      expect(await store().getMessage("m1")).toBeUndefined();
      expect(await store().getMessage("m3")).toMatchObject({ status: "delivered" });
    });

    it("a pending result is announced as claimable work", async () => {
      await delivered(store(), "m1");
      const rec = recordEvents(store());
      await resettle(store(), back("m1", "pending"));
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.a");
      rec.stop();
    });
  });
}
