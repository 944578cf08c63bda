// Conformance cases of ReleaseRequest.hold: the reason a run was given back, shown as RunRecord.held while no one holds it.
import { describe, expect, it } from "vitest";
import type { ConformanceOptions, StoreFactory } from "./harness.ts";
import { freshStore, LEASE, sleepEntry, startRun, step, T0 } from "./harness.ts";
import type { RunPageRequest } from "../console-types.ts";

const MISMATCH = { code: "OKE1301", message: 'journal: run "r1" recorded step "a" at position 0' };

/** releaseRun's `hold`: kept with the run, shown while it waits with no holder, gone once anyone holds it. */
export function holdCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  // Optional: a driver that drops the note shows such a run as running with no holder.
  if (options.releaseHold !== true) return;
  describe("journal: releaseRun's hold (why a run waits)", () => {
    const store = freshStore(factory);

    it("is shown as held, with the release time, by getRun, listRuns and pageRuns while the run has no holder", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({
        runId: "r1",
        owner: "a",
        now: T0 + 5,
        retryAt: T0 + 30_005,
        hold: MISMATCH,
      });
      const held = { ...MISMATCH, since: T0 + 5 };
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: null,
        leaseExpiresAt: T0 + 30_005,
        held,
      });
      expect((await store().listRuns({ status: "running" }))[0]).toMatchObject({ id: "r1", held });
      expect((await store().pageRuns({ limit: 10 })).items[0]).toMatchObject({ id: "r1", held });
    });

    it("pageRuns({ held: true }) lists only held runs, with the other filters and the cursor", async () => {
      for (const [i, id] of ["h1", "h2", "h3"].entries()) {
        await startRun(store(), id, { owner: "a", now: T0 + i, flow: id === "h3" ? "flow.b" : "flow.a" });
        await store().releaseRun({ runId: id, owner: "a", now: T0 + 10, retryAt: T0 + 40, hold: MISMATCH });
      }
      // Not held: one running under a holder, one released without a reason, one held then taken,
      // and one held then parked (the note stays in the row, not shown).
      await startRun(store(), "busy", { owner: "a", now: T0 + 3 });
      await startRun(store(), "plain", { owner: "a", now: T0 + 4 });
      await store().releaseRun({ runId: "plain", owner: "a", now: T0 + 10, retryAt: T0 + 40 });
      for (const [i, id] of ["taken", "parked"].entries()) {
        await startRun(store(), id, { owner: "a", now: T0 + 5 + i });
        await store().releaseRun({ runId: id, owner: "a", now: T0 + 10, retryAt: T0 + 11, hold: MISMATCH });
        await store().acquireRun({ runId: id, owner: "b", now: T0 + 11, leaseMs: LEASE });
      }
      await store().park({
        runId: "parked",
        owner: "b",
        now: T0 + 12,
        entry: sleepEntry("parked", 0, T0 + 99_999, T0 + 12),
      });

      const ids = async (req: Omit<RunPageRequest, "limit">, limit = 10) =>
        (await store().pageRuns({ ...req, limit, held: true })).items.map((r) => r.id);
      expect(await ids({})).toEqual(["h3", "h2", "h1"]);
      expect(await ids({ status: "running" })).toEqual(["h3", "h2", "h1"]);
      expect(await ids({ status: "sleeping" })).toEqual([]);
      expect(await ids({ flow: "flow.a" })).toEqual(["h2", "h1"]);
      const first = await store().pageRuns({ held: true, limit: 2 });
      expect(first.items.map((r) => r.id)).toEqual(["h3", "h2"]);
      expect(await ids({ cursor: first.next }, 2)).toEqual(["h1"]);
    });

    it("is not shown once the run is held again, by a take or a claim, and a later release without one clears it", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({ runId: "r1", owner: "a", now: T0 + 5, retryAt: T0 + 10, hold: MISMATCH });
      const [taken] = await store().claimDueRuns({ owner: "b", now: T0 + 10, max: 1, leaseMs: LEASE });
      expect(taken?.run).toMatchObject({ id: "r1", leaseOwner: "b" });
      expect(taken?.run.held).toBeUndefined();
      expect((await store().getRun("r1"))?.held).toBeUndefined();
      await store().releaseRun({ runId: "r1", owner: "b", now: T0 + 11, retryAt: T0 + 12 });
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: null, leaseExpiresAt: T0 + 12 });
      expect((await store().getRun("r1"))?.held).toBeUndefined();
    });

    it("a new release's reason replaces the last; a run that goes on and ends shows none", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({ runId: "r1", owner: "a", now: T0 + 1, retryAt: T0 + 2, hold: MISMATCH });
      await store().acquireRun({ runId: "r1", owner: "b", now: T0 + 2, leaseMs: LEASE });
      const later = { code: "OKE1301", message: "another mismatch" };
      await store().releaseRun({ runId: "r1", owner: "b", now: T0 + 3, retryAt: T0 + 4, hold: later });
      expect((await store().getRun("r1"))?.held).toEqual({ ...later, since: T0 + 3 });
      await store().acquireRun({ runId: "r1", owner: "c", now: T0 + 4, leaseMs: LEASE });
      await store().append({
        runId: "r1",
        owner: "c",
        now: T0 + 5,
        leaseMs: LEASE,
        entries: [step("r1", 0)],
      });
      await store().finish({ runId: "r1", owner: "c", now: T0 + 6, status: "completed", output: 1 });
      const done = await store().getRun("r1");
      expect(done).toMatchObject({ status: "completed", leaseOwner: null });
      expect(done?.held).toBeUndefined();
    });

    it("keeps its first time while the run is given back again for the same reason with the same journal", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().append({
        runId: "r1",
        owner: "a",
        now: T0 + 1,
        leaseMs: LEASE,
        entries: [step("r1", 0)],
      });
      const again = async (owner: string, now: number, hold: { code: string; message: string }) => {
        await store().acquireRun({ runId: "r1", owner, now, leaseMs: LEASE });
        await store().releaseRun({ runId: "r1", owner, now: now + 1, retryAt: now + 30_001, hold });
        return (await store().getRun("r1"))?.held;
      };
      await store().releaseRun({
        runId: "r1",
        owner: "a",
        now: T0 + 5,
        retryAt: T0 + 30_005,
        hold: MISMATCH,
      });
      // Tried again twice, held back the same way: how long it has waited, not when the last try was.
      expect(await again("b", T0 + 30_005, MISMATCH)).toEqual({ ...MISMATCH, since: T0 + 5 });
      expect(await again("c", T0 + 60_010, MISMATCH)).toEqual({ ...MISMATCH, since: T0 + 5 });
      // Another reason starts over.
      const other = { code: "OKE1301", message: "another mismatch" };
      expect(await again("d", T0 + 90_000, other)).toEqual({ ...other, since: T0 + 90_001 });
      // So does progress: the journal grew between the two releases.
      await store().acquireRun({ runId: "r1", owner: "e", now: T0 + 120_000, leaseMs: LEASE });
      await store().append({
        runId: "r1",
        owner: "e",
        now: T0 + 120_001,
        leaseMs: LEASE,
        entries: [step("r1", 1)],
      });
      await store().releaseRun({
        runId: "r1",
        owner: "e",
        now: T0 + 120_002,
        retryAt: T0 + 150_000,
        hold: other,
      });
      expect((await store().getRun("r1"))?.held).toEqual({ ...other, since: T0 + 120_002 });
      // And a release without a reason in between.
      await store().acquireRun({ runId: "r1", owner: "f", now: T0 + 150_000, leaseMs: LEASE });
      await store().releaseRun({ runId: "r1", owner: "f", now: T0 + 150_001, retryAt: T0 + 150_002 });
      expect(await again("g", T0 + 150_002, other)).toEqual({ ...other, since: T0 + 150_003 });
    });

    it("a release by someone who does not hold the run keeps no reason", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({ runId: "r1", owner: "x", now: T0 + 1, retryAt: T0 + 2, hold: MISMATCH });
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: "a" });
      expect((await store().getRun("r1"))?.held).toBeUndefined();
    });
  });
}
