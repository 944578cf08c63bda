// Conformance cases of terminateRun: an operator ends a run no one holds, for good (failed, never due again).
import { describe, expect, it } from "vitest";
import {
  expectBusy,
  freshStore,
  LEASE,
  sleepEntry,
  sleepingRun,
  startRun,
  step,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";
import type { Store, TerminateOutcome } from "../types.ts";

const ERROR = { code: "OKE1339", message: "terminated by ops at 2023-11-14T22:13:20.000Z: flow changed" };
const FAR = T0 + 365 * 24 * 3_600_000;

/** `store.terminateRun`, which every built-in driver has. */
const terminate = (store: Store, runId: string, now: number): Promise<TerminateOutcome> => {
  if (store.terminateRun === undefined) throw new Error(`the ${store.driver} driver has no terminateRun`);
  return store.terminateRun({ runId, now, error: ERROR });
};

/** Nothing claims the run again, whoever asks and however late. */
async function neverDue(store: Store, runId: string): Promise<void> {
  expect(await store.claimDueRuns({ owner: "z", now: FAR, max: 10, leaseMs: LEASE })).toEqual([]);
  expect(
    await store.claimDueRuns({ owner: "z", now: FAR, max: 10, leaseMs: LEASE, runIds: [runId] }),
  ).toEqual([]);
  expect(await store.nextWakeAt()).toBeNull();
  expect(await store.listOrphans(FAR)).toEqual([]);
}

/** terminateRun: failed with the operator's error when no one holds the run; refused (nothing written) when someone does. */
export function terminateCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("journal: terminateRun (an operator ends a run)", () => {
    const store = freshStore(factory);
    if (options.terminateRun !== true) {
      // Optional in the contract: without it the Console and the CLI say runs cannot be terminated.
      it("is absent when the driver does not claim it", () => {
        expect(Reflect.get(store(), "terminateRun")).toBeUndefined();
      });
      return;
    }

    it("ends a sleeping run failed with the error, lease and wake cleared, and it is no longer due", async () => {
      await sleepingRun(store(), "r1", T0 + 60_000);
      const out = await terminate(store(), "r1", T0 + 5);
      expect(out.outcome).toBe("terminated");
      const expected = {
        id: "r1",
        status: "failed",
        error: ERROR,
        leaseOwner: null,
        leaseExpiresAt: null,
        wakeAt: null,
        recoveries: 0,
        updatedAt: T0 + 5,
      };
      expect(out.outcome === "terminated" ? out.run : undefined).toMatchObject(expected);
      expect(await store().getRun("r1")).toMatchObject(expected);
      // Its journal stays as it was: no undo ran, nothing was appended.
      expect((await store().getJournal("r1")).map((e) => e.seq)).toEqual([0]);
      expect(await store().wakeEarly("r1", T0 + 6)).toBe(false);
      await neverDue(store(), "r1");
    });

    it("ends a held-back run (released with a reason and a retry time); it shows held no longer", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().releaseRun({
        runId: "r1",
        owner: "a",
        now: T0 + 1,
        retryAt: T0 + 30_001,
        hold: { code: "OKE1301", message: "journal mismatch" },
      });
      const out = await terminate(store(), "r1", T0 + 2);
      expect(out.outcome).toBe("terminated");
      const run = await store().getRun("r1");
      expect(run).toMatchObject({ status: "failed", error: ERROR, leaseOwner: null, leaseExpiresAt: null });
      expect(run?.held).toBeUndefined();
      expect((await store().pageRuns({ limit: 10, held: true })).items).toEqual([]);
      await neverDue(store(), "r1");
    });

    it("ends a running run whose lease lapsed, counting no recovery", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().append({ runId: "r1", owner: "a", now: T0 + 1, entries: [step("r1", 0)] });
      const out = await terminate(store(), "r1", T0 + LEASE);
      expect(out.outcome).toBe("terminated");
      expect(await store().getRun("r1")).toMatchObject({ status: "failed", error: ERROR, recoveries: 0 });
      await neverDue(store(), "r1");
    });

    it("refuses a run with a live holder: held, naming it and when its lease lapses, nothing written", async () => {
      await startRun(store(), "r1", { owner: "a" });
      const before = await store().getRun("r1");
      expect(await terminate(store(), "r1", T0 + LEASE - 1)).toEqual({
        outcome: "held",
        leaseOwner: "a",
        leaseExpiresAt: T0 + LEASE,
      });
      expect(await store().getRun("r1")).toEqual(before);
      // The holder goes on as if nothing was asked.
      await store().append({ runId: "r1", owner: "a", now: T0 + 2, entries: [step("r1", 0)] });
      await store().finish({ runId: "r1", owner: "a", now: T0 + 3, status: "completed", output: 1 });
      expect(await store().getRun("r1")).toMatchObject({ status: "completed" });
    });

    it("refuses a sleeper another instance reserved while the reservation is live, and ends it once it lapsed", async () => {
      await sleepingRun(store(), "r1", T0 + 1_000);
      const reserved = await store().claimDueRuns({
        owner: "b",
        now: T0 + 500,
        max: 1,
        leaseMs: LEASE,
        sleepersDueBy: T0 + 1_000,
      });
      expect(reserved.map((a) => a.run.status)).toEqual(["sleeping"]);
      const before = await store().getRun("r1");
      expect(await terminate(store(), "r1", T0 + 600)).toEqual({
        outcome: "held",
        leaseOwner: "b",
        leaseExpiresAt: T0 + 500 + LEASE,
      });
      expect(await store().getRun("r1")).toEqual(before);
      const out = await terminate(store(), "r1", T0 + 500 + LEASE);
      expect(out.outcome).toBe("terminated");
      // The reserver's resuming claim finds nothing.
      expect(
        await store().claimDueRuns({
          owner: "b",
          now: T0 + 500 + LEASE + 1,
          max: 1,
          leaseMs: LEASE,
          runIds: ["r1"],
        }),
      ).toEqual([]);
    });

    it("answers final for an ended run (its status) and missing for no run, writing nothing", async () => {
      await startRun(store(), "r1", { owner: "a" });
      await store().finish({ runId: "r1", owner: "a", now: T0 + 1, status: "completed", output: { ok: 1 } });
      const before = await store().getRun("r1");
      expect(await terminate(store(), "r1", T0 + 2)).toEqual({ outcome: "final", status: "completed" });
      expect(await store().getRun("r1")).toEqual(before);
      expect(await terminate(store(), "nope", T0 + 2)).toEqual({ outcome: "missing" });
      expect(await store().getRun("nope")).toBeUndefined();
    });

    it("refuses the old holder's later writes (JournalLeaseBusy): its lapsed lease no longer lets it write", async () => {
      await startRun(store(), "r1", { owner: "a" });
      expect((await terminate(store(), "r1", T0 + LEASE + 1)).outcome).toBe("terminated");
      const now = T0 + LEASE + 2;
      await expectBusy(store().append({ runId: "r1", owner: "a", now, entries: [step("r1", 0)] }), "r1");
      await expectBusy(store().renewLease({ runId: "r1", owner: "a", now, leaseMs: LEASE }), "r1");
      await expectBusy(
        store().park({ runId: "r1", owner: "a", now, entry: sleepEntry("r1", 0, now + 1_000, now) }),
        "r1",
      );
      await expectBusy(
        store().finish({ runId: "r1", owner: "a", now, status: "completed", output: 1 }),
        "r1",
      );
      expect(await store().getRun("r1")).toMatchObject({ status: "failed", error: ERROR });
      expect(await store().getJournal("r1")).toEqual([]);
    });

    it("is idempotent: the same terminate retried answers final (failed) and changes nothing", async () => {
      await sleepingRun(store(), "r1", T0 + 60_000);
      expect((await terminate(store(), "r1", T0 + 5)).outcome).toBe("terminated");
      const after = await store().getRun("r1");
      expect(await terminate(store(), "r1", T0 + 5)).toEqual({ outcome: "final", status: "failed" });
      expect(await terminate(store(), "r1", T0 + 9)).toEqual({ outcome: "final", status: "failed" });
      expect(await store().getRun("r1")).toEqual(after);
    });
  });
}
