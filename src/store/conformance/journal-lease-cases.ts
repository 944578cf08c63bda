/** Conformance cases of run leases: start, acquire, renew, release, and refusals. */
import { describe, expect, it } from "vitest";
import {
  expectBusy,
  freshStore,
  LEASE,
  recordEvents,
  sleepingRun,
  startRun,
  step,
  T0,
  type StoreFactory,
} from "./harness.ts";
import { entryName } from "../types.ts";

/** Run leases: start, acquire, renew, release, and the refusals. */
export function journalLeaseCases(factory: StoreFactory): void {
  describe("journal: start, acquire and leases", () => {
    const store = freshStore(factory);

    it("startRun creates the run holding its lease", async () => {
      const got = await startRun(store(), "r1", {
        owner: "inst-1",
        input: { email: "a@x" },
        parentRunId: "p-1",
      });
      const expected = {
        id: "r1",
        flow: "flow.a",
        status: "running",
        input: { email: "a@x" },
        parentRunId: "p-1",
        leaseOwner: "inst-1",
        leaseExpiresAt: T0 + LEASE,
        wakeAt: null,
        recoveries: 0,
        createdAt: T0,
        updatedAt: T0,
      };
      expect(got).toEqual({ run: expected, entries: [], created: true });
      expect(await store().getRun("r1")).toEqual(expected);
      expect(await store().getRun("nope")).toBeUndefined();
      expect(await store().getJournal("nope")).toEqual([]);
    });

    it("startRun by another owner while the lease is live throws JournalLeaseBusy", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(startRun(store(), "r1", { owner: "inst-2", now: T0 + LEASE - 1 }), "r1");
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: "inst-1", leaseExpiresAt: T0 + LEASE });
    });

    it("once the lease has expired another owner acquires the run with its journal", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [step("r1", 0), step("r1", 1)],
      });
      const got = await startRun(store(), "r1", {
        owner: "inst-2",
        now: T0 + LEASE,
        input: { ignored: true },
      });
      expect(got.created).toBe(false);
      expect(got.run).toMatchObject({
        status: "running",
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 2 * LEASE,
        input: { run: "r1" },
        updatedAt: T0 + LEASE,
      });
      expect(got.entries.map((e) => [e.seq, entryName(e)])).toEqual([
        [0, "step-0"],
        [1, "step-1"],
      ]);
    });

    it("the same owner may start again while holding the lease, which renews it", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      const got = await startRun(store(), "r1", { owner: "inst-1", now: T0 + 1_000 });
      expect(got.created).toBe(false);
      expect(got.run.leaseExpiresAt).toBe(T0 + 1_000 + LEASE);
    });

    it("acquireRun: busy while leased, free after release, not found when missing", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(
        store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + 1, leaseMs: LEASE }),
        "r1",
      );
      await store().releaseRun({ runId: "r1", owner: "inst-1", now: T0 + 2 });
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: null,
        leaseExpiresAt: null,
      });
      const got = await store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + 3, leaseMs: 500 });
      expect(got.run).toMatchObject({ leaseOwner: "inst-2", leaseExpiresAt: T0 + 503 });
      await expect(
        store().acquireRun({ runId: "ghost", owner: "inst-2", now: T0, leaseMs: LEASE }),
      ).rejects.toMatchObject({
        code: "OKE1311",
      });
    });

    it("acquireRun with inFlightOnly takes a running run but refuses a sleeper (busy), which keeps its wake time", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await store().releaseRun({ runId: "r1", owner: "inst-1", now: T0 + 1 });
      const got = await store().acquireRun({
        runId: "r1",
        owner: "inst-2",
        now: T0 + 2,
        leaseMs: LEASE,
        inFlightOnly: true,
      });
      expect(got.run).toMatchObject({ status: "running", leaseOwner: "inst-2" });
      await sleepingRun(store(), "s1", T0 + 60_000);
      await expectBusy(
        store().acquireRun({ runId: "s1", owner: "inst-2", now: T0 + 3, leaseMs: LEASE, inFlightOnly: true }),
        "s1",
      );
      expect(await store().getRun("s1")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 60_000,
        leaseOwner: null,
      });
    });

    it("terminal runs refuse resume (OKE1310) from startRun and acquireRun", async () => {
      await startRun(store(), "done");
      await store().finish({ runId: "done", owner: "inst-1", now: T0, status: "completed", output: 1 });
      await startRun(store(), "bad");
      await store().finish({
        runId: "bad",
        owner: "inst-1",
        now: T0,
        status: "failed",
        error: { code: "E", message: "x" },
      });
      await expect(
        store().acquireRun({ runId: "done", owner: "inst-2", now: T0, leaseMs: LEASE }),
      ).rejects.toMatchObject({
        code: "OKE1310",
        message: 'journal: run "done" is completed',
      });
      await expect(startRun(store(), "done", { owner: "inst-1" })).rejects.toMatchObject({ code: "OKE1310" });
      await expect(
        store().acquireRun({ runId: "bad", owner: "inst-1", now: T0, leaseMs: LEASE }),
      ).rejects.toMatchObject({
        code: "OKE1310",
        message: 'journal: run "bad" is failed',
      });
      expect(await store().getRun("done")).toMatchObject({ status: "completed", leaseOwner: null });
    });

    it("renewLease extends the holder's lease and refuses anyone else", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await store().renewLease({ runId: "r1", owner: "inst-1", now: T0 + 10_000, leaseMs: LEASE });
      expect((await store().getRun("r1"))!.leaseExpiresAt).toBe(T0 + 10_000 + LEASE);
      await expectBusy(
        store().renewLease({ runId: "r1", owner: "inst-2", now: T0 + 10_000, leaseMs: LEASE }),
        "r1",
      );
      // After a takeover the previous holder is fenced off.
      await store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + 10_000 + LEASE, leaseMs: LEASE });
      await expectBusy(
        store().renewLease({ runId: "r1", owner: "inst-1", now: T0 + 10_000 + LEASE, leaseMs: LEASE }),
        "r1",
      );
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: "inst-2" });
    });

    it("releaseRun by a non-holder changes nothing", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await store().releaseRun({ runId: "r1", owner: "inst-2", now: T0 + 1 });
      expect(await store().getRun("r1")).toMatchObject({ leaseOwner: "inst-1", leaseExpiresAt: T0 + LEASE });
    });

    it("releaseRun repeated after it landed (a retry after a lost reply) resolves and changes nothing, also once another owner holds the run", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      const release = { runId: "r1", owner: "inst-1", now: T0 + 1, retryAt: T0 + 5_000 };
      await store().releaseRun(release);
      await store().releaseRun(release);
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: null,
        leaseExpiresAt: T0 + 5_000,
      });
      await store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + 2, leaseMs: LEASE });
      await store().releaseRun({ ...release, now: T0 + 3 });
      expect(await store().getRun("r1")).toMatchObject({
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 2 + LEASE,
      });
    });

    it("releaseRun with retryAt: due at that time for any claimer, and announced as a wake", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      const rec = recordEvents(store());
      await store().releaseRun({ runId: "r1", owner: "inst-1", now: T0 + 1, retryAt: T0 + 5_000 });
      await rec.next((e) => e.kind === "wake");
      rec.stop();
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: null,
        leaseExpiresAt: T0 + 5_000,
      });
      expect(await store().nextWakeAt()).toBe(T0 + 5_000);
      expect(
        await store().claimDueRuns({ owner: "inst-2", now: T0 + 4_999, max: 10, leaseMs: LEASE }),
      ).toEqual([]);
      const got = await store().claimDueRuns({ owner: "inst-2", now: T0 + 5_000, max: 10, leaseMs: LEASE });
      expect(got.map((a) => a.run)).toEqual([
        expect.objectContaining({ id: "r1", status: "running", leaseOwner: "inst-2" }),
      ]);
    });

    it("acquiring a sleeping run makes it running and drops its wake-up", async () => {
      await sleepingRun(store(), "r1", T0 + 60_000);
      const got = await store().acquireRun({ runId: "r1", owner: "inst-2", now: T0 + 1, leaseMs: LEASE });
      expect(got.run).toMatchObject({ status: "running", wakeAt: null, leaseOwner: "inst-2" });
      expect(got.entries.map((e) => e.kind)).toEqual(["sleep"]);
      // Its next deadline is now the new holder's lease expiry, no longer the wake time.
      expect(await store().nextWakeAt()).toBe(T0 + 1 + LEASE);
      expect(
        await store().claimDueRuns({ owner: "inst-3", now: T0 + LEASE, max: 10, leaseMs: LEASE }),
      ).toEqual([]);
    });

    it("claimDueRuns takes over a running run whose lease expired, but not a released one", async () => {
      await startRun(store(), "dead", { owner: "inst-1" });
      await startRun(store(), "released", { owner: "inst-1" });
      await store().releaseRun({ runId: "released", owner: "inst-1", now: T0 + 1 });
      expect(await store().nextWakeAt()).toBe(T0 + LEASE);
      expect(
        await store().claimDueRuns({ owner: "inst-2", now: T0 + LEASE - 1, max: 10, leaseMs: LEASE }),
      ).toEqual([]);
      const got = await store().claimDueRuns({ owner: "inst-2", now: T0 + LEASE, max: 10, leaseMs: LEASE });
      expect(got.map((a) => a.run.id)).toEqual(["dead"]);
      expect(got[0]!.run).toMatchObject({
        status: "running",
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 2 * LEASE,
      });
      await expectBusy(
        store().renewLease({ runId: "dead", owner: "inst-1", now: T0 + LEASE, leaseMs: LEASE }),
        "dead",
      );
      expect(await store().getRun("released")).toMatchObject({ status: "running", leaseOwner: null });
    });
  });
}
