/** Conformance cases of a run's recovery count: only takeovers of a lapsed lease count, in the take itself. */
import { describe, expect, it } from "vitest";
import { expectBusy, freshStore, LEASE, sleepingRun, startRun, T0, type StoreFactory } from "./harness.ts";

/** RunRecord.recoveries: what counts (a lapsed holder's run taken by anyone) and what does not. */
export function recoveryCases(factory: StoreFactory): void {
  describe("journal: recoveries", () => {
    const store = freshStore(factory);
    const recoveries = async (id: string): Promise<number | undefined> =>
      (await store().getRun(id))?.recoveries;

    it("a new run has none; each takeover after a lapsed lease counts one, through every kind of take", async () => {
      const got = await startRun(store(), "r1", { owner: "a" });
      expect(got.run.recoveries).toBe(0);
      // acquireRun of a lapsed lease.
      const t1 = T0 + LEASE;
      expect(
        (await store().acquireRun({ runId: "r1", owner: "b", now: t1, leaseMs: LEASE })).run,
      ).toMatchObject({ leaseOwner: "b", recoveries: 1 });
      // startRun of an existing run whose lease lapsed (a redelivery after a crash).
      const t2 = t1 + LEASE;
      expect((await startRun(store(), "r1", { owner: "c", now: t2 })).run.recoveries).toBe(2);
      // claimDueRuns (the scheduler's scan) and claimDueRuns by id (a wake timer's claim).
      const t3 = t2 + LEASE;
      const scan = await store().claimDueRuns({ owner: "d", now: t3, max: 10, leaseMs: LEASE });
      expect(scan.map((a) => [a.run.id, a.run.recoveries])).toEqual([["r1", 3]]);
      const t4 = t3 + LEASE;
      const byId = await store().claimDueRuns({
        owner: "e",
        now: t4,
        max: 10,
        leaseMs: LEASE,
        runIds: ["r1"],
      });
      expect(byId.map((a) => [a.run.id, a.run.recoveries])).toEqual([["r1", 4]]);
      expect(await recoveries("r1")).toBe(4);
      expect((await store().listRuns({ flow: "flow.a" })).map((r) => r.recoveries)).toEqual([4]);
    });

    it("no recovery: the holder starting again, renewing, or a refused take while the lease is live", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await startRun(store(), "r1", { owner: "a", now: T0 + 1_000 });
      await store().renewLease({ runId: "r1", owner: "a", now: T0 + 2_000, leaseMs: LEASE });
      await expectBusy(
        store().acquireRun({ runId: "r1", owner: "b", now: T0 + 3_000, leaseMs: LEASE }),
        "r1",
      );
      await expectBusy(startRun(store(), "r1", { owner: "b", now: T0 + 3_000 }), "r1");
      expect(await store().claimDueRuns({ owner: "b", now: T0 + 3_000, max: 10, leaseMs: LEASE })).toEqual(
        [],
      );
      expect(await recoveries("r1")).toBe(0);
    });

    it("no recovery: waking a sleeper (claim, acquire, wake early), and taking a released run", async () => {
      await sleepingRun(store(), "s1", T0 + 1_000);
      const woke = await store().claimDueRuns({ owner: "b", now: T0 + 1_000, max: 10, leaseMs: LEASE });
      expect(woke.map((a) => [a.run.id, a.run.recoveries])).toEqual([["s1", 0]]);
      await sleepingRun(store(), "s2", T0 + 60_000);
      expect(
        (await store().acquireRun({ runId: "s2", owner: "b", now: T0, leaseMs: LEASE })).run.recoveries,
      ).toBe(0);
      await sleepingRun(store(), "s3", T0 + 60_000);
      expect(await store().wakeEarly("s3", T0 + 10)).toBe(true);
      const early = await store().claimDueRuns({
        owner: "b",
        now: T0 + 10,
        max: 10,
        leaseMs: LEASE,
        runIds: ["s3"],
      });
      expect(early.map((a) => a.run.recoveries)).toEqual([0]);
      // Released at a graceful stop, then taken again (even after the old lease's time).
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({ runId: "r1", owner: "a", now: T0 + 1 });
      await store().acquireRun({ runId: "r1", owner: "b", now: T0 + 2 * LEASE, leaseMs: LEASE });
      // Released with a retry time (an instance without the flow), then claimed when due.
      await startRun(store(), "r2", { owner: "a" });
      await store().releaseRun({ runId: "r2", owner: "a", now: T0 + 1, retryAt: T0 + 5_000 });
      const retried = await store().claimDueRuns({
        owner: "b",
        now: T0 + 5_000,
        max: 10,
        leaseMs: LEASE,
        runIds: ["r2"],
      });
      expect(retried.map((a) => a.run.recoveries)).toEqual([0]);
      for (const id of ["s1", "s2", "s3", "r1", "r2"]) expect(await recoveries(id)).toBe(0);
    });

    it("the count stays through a park and a wake, and a compensating run's takeover counts too", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().acquireRun({ runId: "r1", owner: "b", now: T0 + LEASE, leaseMs: LEASE });
      await store().park({
        runId: "r1",
        owner: "b",
        now: T0 + LEASE,
        entry: {
          runId: "r1",
          seq: 0,
          kind: "sleep",
          label: "nap",
          duration: "1s",
          wakeAt: T0 + LEASE + 1_000,
          at: T0 + LEASE,
        },
      });
      const woke = await store().claimDueRuns({
        owner: "c",
        now: T0 + LEASE + 1_000,
        max: 1,
        leaseMs: LEASE,
      });
      expect(woke.map((a) => a.run.recoveries)).toEqual([1]);
      await store().beginCompensation({
        runId: "r1",
        owner: "c",
        now: T0 + LEASE + 1_000,
        error: { code: "E", message: "failed" },
      });
      const t = T0 + 2 * LEASE + 1_000;
      const taken = await store().claimDueRuns({ owner: "d", now: t, max: 1, leaseMs: LEASE });
      expect(taken.map((a) => [a.run.status, a.run.recoveries])).toEqual([["compensating", 2]]);
      await store().finish({
        runId: "r1",
        owner: "d",
        now: t,
        status: "failed",
        error: { code: "E", message: "failed" },
      });
      expect(await store().getRun("r1")).toMatchObject({ status: "failed", recoveries: 2 });
    });
  });
}
