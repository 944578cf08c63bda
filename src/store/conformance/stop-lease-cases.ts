// Conformance cases of leaveToLease (a graceful stop leaves runs to their leases: taken after the lapse with no recovery) and of AcquiredRun.recoveredFrom.
import { describe, expect, it } from "vitest";
import {
  expectBusy,
  freshStore,
  LEASE,
  sleepingRun,
  startRun,
  step,
  T0,
  type StoreFactory,
  type ConformanceOptions,
} from "./harness.ts";
import type { Store } from "../types.ts";

/** The lease `a` holds, left to lapse by a graceful stop: its owner's new name. */
const LEFT = "a#stopped";
const LAPSED = T0 + LEASE;

/** `store.leaveToLease`, which every built-in driver has. */
const leave = (
  store: Store,
  runs: Array<{ runId: string; owner: string }>,
  now = T0 + 1,
): Promise<string[]> => {
  if (store.leaveToLease === undefined) throw new Error(`the ${store.driver} driver has no leaveToLease`);
  return store.leaveToLease({ runs, now });
};

/** leaveToLease: the lease stays live to everyone else, the holder writes on under the new name, the take after the lapse counts no recovery. */
export function stopLeaseCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("journal: leaveToLease (a graceful stop's runs)", () => {
    const store = freshStore(factory);
    if (options.leaveToLease !== true) {
      // Optional in the contract: without it a run a graceful stop leaves is a recovery when taken over.
      it("is absent when the driver does not claim it", () => {
        expect(Reflect.get(store(), "leaveToLease")).toBeUndefined();
      });
      return;
    }

    it("keeps the lease and its expiry under the stopped owner; nobody else takes the run before it lapses, by any take", async () => {
      await startRun(store(), "r1", { owner: "a" });
      expect(await leave(store(), [{ runId: "r1", owner: "a" }])).toEqual(["r1"]);
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: LEFT,
        leaseExpiresAt: T0 + LEASE,
        recoveries: 0,
      });
      const before = LAPSED - 1;
      await expectBusy(store().acquireRun({ runId: "r1", owner: "b", now: before, leaseMs: LEASE }), "r1");
      await expectBusy(
        store().acquireRun({ runId: "r1", owner: "b", now: before, leaseMs: LEASE, inFlightOnly: true }),
        "r1",
      );
      await expectBusy(startRun(store(), "r1", { owner: "b", now: before }), "r1");
      expect(await store().claimDueRuns({ owner: "b", now: before, max: 10, leaseMs: LEASE })).toEqual([]);
      expect(
        await store().claimDueRuns({ owner: "b", now: before, max: 10, leaseMs: LEASE, runIds: ["r1"] }),
      ).toEqual([]);
      expect(await store().listOrphans(before)).toEqual([]);
      // Still the earliest deadline: every scheduler arms on its lapse.
      expect(await store().nextWakeAt()).toBe(T0 + LEASE);
    });

    it("taken after the lapse counts no recovery, by every kind of take, and names no previous holder", async () => {
      for (const id of ["scan", "byid", "acquire", "start"]) await startRun(store(), id, { owner: "a" });
      const ids = ["scan", "byid", "acquire", "start"];
      expect(
        await leave(
          store(),
          ids.map((runId) => ({ runId, owner: "a" })),
        ),
      ).toEqual(ids);
      expect((await store().listOrphans(LAPSED)).map((r) => r.id).sort()).toEqual([...ids].sort());
      const byId = await store().claimDueRuns({
        owner: "b",
        now: LAPSED,
        max: 10,
        leaseMs: LEASE,
        runIds: ["byid"],
      });
      const acquired = await store().acquireRun({
        runId: "acquire",
        owner: "b",
        now: LAPSED,
        leaseMs: LEASE,
      });
      const started = await startRun(store(), "start", { owner: "b", now: LAPSED });
      const scan = await store().claimDueRuns({ owner: "b", now: LAPSED, max: 10, leaseMs: LEASE });
      for (const got of [...byId, ...scan, acquired, started]) {
        expect(got.run).toMatchObject({ status: "running", leaseOwner: "b", recoveries: 0 });
        expect(got.recoveredFrom).toBeUndefined();
      }
      expect([...byId, ...scan].map((a) => a.run.id).sort()).toEqual(["byid", "scan"]);
    });

    it("the holder writes, renews and finishes on under the stopped owner; its old name is refused", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await leave(store(), [{ runId: "r1", owner: "a" }]);
      await expectBusy(
        store().append({ runId: "r1", owner: "a", now: T0 + 2, entries: [step("r1", 0)], leaseMs: LEASE }),
        "r1",
      );
      await expectBusy(store().renewLease({ runId: "r1", owner: "a", now: T0 + 2, leaseMs: LEASE }), "r1");
      await store().append({
        runId: "r1",
        owner: LEFT,
        now: T0 + 3,
        entries: [step("r1", 0)],
        leaseMs: LEASE,
      });
      await store().renewLease({ runId: "r1", owner: LEFT, now: T0 + 4, leaseMs: LEASE });
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: LEFT, leaseExpiresAt: T0 + 4 + LEASE });
      await store().finish({ runId: "r1", owner: LEFT, now: T0 + 5, status: "completed", output: "ok" });
      expect(await store().getRun("r1")).toMatchObject({
        status: "completed",
        leaseOwner: null,
        recoveries: 0,
      });
    });

    it("a compensating run left so: its takeover counts no recovery either, and it stays compensating", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().beginCompensation({
        runId: "r1",
        owner: "a",
        now: T0 + 1,
        error: { code: "E", message: "boom" },
      });
      expect(await leave(store(), [{ runId: "r1", owner: "a" }], T0 + 2)).toEqual(["r1"]);
      const [got] = await store().claimDueRuns({ owner: "b", now: LAPSED, max: 10, leaseMs: LEASE });
      expect(got?.run).toMatchObject({ id: "r1", status: "compensating", leaseOwner: "b", recoveries: 0 });
    });

    it("leaves alone a run the owner does not hold: another's, ended, parked, released, missing; a retry reports the same and changes nothing", async () => {
      await startRun(store(), "mine", { owner: "a" });
      await startRun(store(), "theirs", { owner: "c" });
      await startRun(store(), "done", { owner: "a" });
      await store().finish({ runId: "done", owner: "a", now: T0, status: "completed", output: 1 });
      await sleepingRun(store(), "parked", T0 + 60_000, { owner: "a" });
      await startRun(store(), "released", { owner: "a" });
      await store().releaseRun({ runId: "released", owner: "a", now: T0 });
      const runs = ["mine", "theirs", "done", "parked", "released", "missing"].map((runId) => ({
        runId,
        owner: "a",
      }));
      expect(await leave(store(), runs)).toEqual(["mine"]);
      expect(await leave(store(), runs, T0 + 7)).toEqual(["mine"]);
      expect(await store().getRun("mine")).toMatchObject({ leaseOwner: LEFT, leaseExpiresAt: T0 + LEASE });
      expect(await store().getRun("theirs")).toMatchObject({ leaseOwner: "c" });
      expect(await store().getRun("done")).toMatchObject({ status: "completed", leaseOwner: null });
      expect(await store().getRun("parked")).toMatchObject({ status: "sleeping", leaseOwner: null });
      expect(await store().getRun("released")).toMatchObject({ status: "running", leaseOwner: null });
      expect(await leave(store(), [])).toEqual([]);
    });

    it("a lapsed lease no stop left still counts one recovery, and the take names the holder it was recovered from", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await startRun(store(), "r2", { owner: "a" });
      const [scan] = await store().claimDueRuns({ owner: "b", now: LAPSED, max: 1, leaseMs: LEASE });
      expect(scan).toMatchObject({ run: { id: "r1", recoveries: 1 }, recoveredFrom: "a" });
      const acquired = await store().acquireRun({ runId: "r2", owner: "b", now: LAPSED, leaseMs: LEASE });
      expect(acquired).toMatchObject({ run: { recoveries: 1 }, recoveredFrom: "a" });
      // The holder taking its own run again, a fresh start and a sleeper's wake name nobody.
      expect((await startRun(store(), "r2", { owner: "b", now: LAPSED + 1 })).recoveredFrom).toBeUndefined();
      expect((await startRun(store(), "r3", { owner: "b" })).recoveredFrom).toBeUndefined();
      await sleepingRun(store(), "s1", T0 + 10, { owner: "a" });
      const [woke] = await store().claimDueRuns({
        owner: "c",
        now: T0 + 10,
        max: 1,
        leaseMs: LEASE,
        runIds: ["s1"],
      });
      expect(woke).toMatchObject({ run: { id: "s1", recoveries: 0 } });
      expect(woke?.recoveredFrom).toBeUndefined();
    });
  });
}
