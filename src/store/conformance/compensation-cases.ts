/** Conformance cases of the compensating status: begin, undo entries, finish, leases. */
import { describe, expect, it } from "vitest";
import { expectBusy, freshStore, LEASE, startRun, step, T0, type StoreFactory } from "./harness.ts";

const FAILURE = { code: "Error", message: "no stock" };

/** The `compensating` status: entered by the lease holder, leased like running, taken over after a crash. */
export function compensationCases(factory: StoreFactory): void {
  describe("journal: compensating", () => {
    const store = freshStore(factory);

    /** r1 ran step 0 and failed: now compensating under inst-1's lease. */
    async function compensatingRun(now = T0): Promise<void> {
      await startRun(store(), "r1", { now });
      await store().append({ runId: "r1", owner: "inst-1", now, entries: [step("r1", 0, "reserve")] });
      await store().beginCompensation({ runId: "r1", owner: "inst-1", now: now + 1, error: FAILURE });
    }

    it("beginCompensation sets compensating and the error, keeps the lease; undo entries append; finish ends it failed", async () => {
      await compensatingRun();
      expect(await store().getRun("r1")).toMatchObject({
        status: "compensating",
        error: FAILURE,
        leaseOwner: "inst-1",
        leaseExpiresAt: T0 + LEASE,
        updatedAt: T0 + 1,
      });
      expect(await store().listRuns({ status: "compensating" })).toHaveLength(1);
      await store().renewLease({ runId: "r1", owner: "inst-1", now: T0 + 2, leaseMs: LEASE });
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 3,
        entries: [{ runId: "r1", seq: 1, kind: "undo", name: "undo:reserve", at: T0 + 3 }],
      });
      await store().finish({ runId: "r1", owner: "inst-1", now: T0 + 4, status: "failed", error: FAILURE });
      expect(await store().getRun("r1")).toMatchObject({
        status: "failed",
        error: FAILURE,
        leaseOwner: null,
      });
      expect((await store().getJournal("r1")).map((e) => e.kind)).toEqual(["step", "undo"]);
      expect(await store().listRuns({ status: "compensating" })).toEqual([]);
    });

    it("is refused from a non-holder, and from a run that is not running", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(
        store().beginCompensation({ runId: "r1", owner: "inst-2", now: T0, error: FAILURE }),
        "r1",
      );
      expect((await store().getRun("r1"))!.status).toBe("running");
      await store().beginCompensation({ runId: "r1", owner: "inst-1", now: T0, error: FAILURE });
      await expectBusy(
        store().beginCompensation({ runId: "r1", owner: "inst-1", now: T0, error: FAILURE }),
        "r1",
      );
      // Another instance cannot write to it while the lease is live.
      await expectBusy(
        store().append({ runId: "r1", owner: "inst-2", now: T0, entries: [step("r1", 1)] }),
        "r1",
      );
    });

    it("a lapsed lease makes it an orphan, due at its lease expiry; a claim takes it over still compensating", async () => {
      await compensatingRun();
      expect(await store().nextWakeAt()).toBe(T0 + LEASE);
      expect(await store().listOrphans(T0 + LEASE - 1)).toEqual([]);
      expect(
        await store().claimDueRuns({ owner: "inst-2", now: T0 + LEASE - 1, max: 10, leaseMs: LEASE }),
      ).toEqual([]);
      expect((await store().listOrphans(T0 + LEASE)).map((r) => [r.id, r.status])).toEqual([
        ["r1", "compensating"],
      ]);
      const [taken] = await store().claimDueRuns({
        owner: "inst-2",
        now: T0 + LEASE,
        max: 10,
        leaseMs: LEASE,
      });
      expect(taken!.run).toMatchObject({
        id: "r1",
        status: "compensating",
        error: FAILURE,
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 2 * LEASE,
      });
      expect(taken!.entries.map((e) => e.seq)).toEqual([0]);
      // The crashed holder is fenced off; the new one finishes.
      await expectBusy(
        store().finish({ runId: "r1", owner: "inst-1", now: T0 + LEASE, status: "failed", error: FAILURE }),
        "r1",
      );
      await store().finish({
        runId: "r1",
        owner: "inst-2",
        now: T0 + LEASE,
        status: "failed",
        error: FAILURE,
      });
      expect((await store().getRun("r1"))!.status).toBe("failed");
      expect(await store().nextWakeAt()).toBeNull();
    });

    it("acquire keeps it compensating; a release with retryAt makes it due then", async () => {
      await compensatingRun();
      const got = await store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + LEASE, leaseMs: LEASE });
      expect(got.run).toMatchObject({ status: "compensating", leaseOwner: "inst-2" });
      await store().releaseRun({
        runId: "r1",
        owner: "inst-2",
        now: T0 + LEASE,
        retryAt: T0 + LEASE + 5_000,
      });
      expect(await store().getRun("r1")).toMatchObject({ status: "compensating", leaseOwner: null });
      expect(await store().nextWakeAt()).toBe(T0 + LEASE + 5_000);
      const [taken] = await store().claimDueRuns({
        owner: "inst-3",
        now: T0 + LEASE + 5_000,
        max: 10,
        leaseMs: LEASE,
      });
      expect(taken!.run).toMatchObject({ status: "compensating", leaseOwner: "inst-3" });
    });
  });
}
