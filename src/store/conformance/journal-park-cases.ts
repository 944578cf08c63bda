/** Conformance cases of parking, due sleepers, wake early, orphans, finish and listing runs. */
import { describe, expect, it } from "vitest";
import {
  expectBusy,
  freshStore,
  LEASE,
  sleepEntry,
  sleepingRun,
  sortedIds,
  startRun,
  step,
  T0,
  type StoreFactory,
} from "./harness.ts";
import type { JournalEntry } from "../types.ts";
import { wakeRecoveryCases } from "./wake-recovery-cases.ts";

/** Park, due sleepers, wake-early, orphans, finish, and listing runs. */
export function journalParkCases(factory: StoreFactory): void {
  describe("journal: park, wake and finish", () => {
    const store = freshStore(factory);

    it("park appends the sleep entry, sets sleeping + wakeAt and releases the lease", async () => {
      await startRun(store(), "r1");
      await store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 0)] });
      const entry = sleepEntry("r1", 1, T0 + 8 * 3_600_000, T0 + 10);
      await store().park({ runId: "r1", owner: "inst-1", now: T0 + 10, entry });
      expect(await store().getRun("r1")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 8 * 3_600_000,
        leaseOwner: null,
        leaseExpiresAt: null,
        updatedAt: T0 + 10,
      });
      expect(await store().getJournal("r1")).toEqual([step("r1", 0), entry]);
      expect(await store().nextWakeAt()).toBe(T0 + 8 * 3_600_000);
    });

    it("park by a non-holder is refused and changes nothing", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(
        store().park({ runId: "r1", owner: "inst-2", now: T0, entry: sleepEntry("r1", 0, T0 + 1_000) }),
        "r1",
      );
      expect(await store().getRun("r1")).toMatchObject({
        status: "running",
        leaseOwner: "inst-1",
        wakeAt: null,
      });
      expect(await store().getJournal("r1")).toEqual([]);
      // Still the holder's lease expiry, not a wake time.
      expect(await store().nextWakeAt()).toBe((await store().getRun("r1"))!.leaseExpiresAt);
    });

    it("claimDueRuns takes only sleepers with wakeAt <= now and sets them running with a lease", async () => {
      await sleepingRun(store(), "r1", T0 + 100);
      await sleepingRun(store(), "r2", T0 + 200);
      expect(await store().claimDueRuns({ owner: "inst-2", now: T0 + 99, max: 10, leaseMs: LEASE })).toEqual(
        [],
      );
      const got = await store().claimDueRuns({ owner: "inst-2", now: T0 + 100, max: 10, leaseMs: LEASE });
      expect(got).toHaveLength(1);
      expect(got[0]!.created).toBe(false);
      expect(got[0]!.run).toMatchObject({
        id: "r1",
        status: "running",
        wakeAt: null,
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 100 + LEASE,
      });
      expect(got[0]!.entries).toEqual([sleepEntry("r1", 0, T0 + 100)]);
      expect(await store().nextWakeAt()).toBe(T0 + 200);
      expect(await store().claimDueRuns({ owner: "inst-3", now: T0 + 150, max: 10, leaseMs: LEASE })).toEqual(
        [],
      );
    });

    it("claimDueRuns returns each claimed run's journal, equal to a separate read, in deadline order", async () => {
      // r1: several entries (null, absent and object values, a failed step), then a sleep; r2: a lone
      // sleep; r3: an expired running run with no entries; r4: not due (its journal is not returned).
      await startRun(store(), "r1");
      const failed: JournalEntry = {
        ...step("r1", 2, "fails", undefined),
        error: { code: "E1", message: "no" },
      };
      delete failed.value;
      const absent: JournalEntry = step("r1", 1, "absent");
      delete absent.value;
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [step("r1", 0, "nil", null), absent, failed, step("r1", 3, "obj", { a: [1, "x"] })],
      });
      await store().park({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 1,
        entry: sleepEntry("r1", 4, T0 + 30, T0 + 1),
      });
      await sleepingRun(store(), "r2", T0 + 20);
      await startRun(store(), "r3", { leaseMs: 10 });
      await sleepingRun(store(), "r4", T0 + 10_000);
      const got = await store().claimDueRuns({ owner: "inst-2", now: T0 + 100, max: 10, leaseMs: LEASE });
      expect(got.map((a) => a.run.id)).toEqual(["r3", "r2", "r1"]);
      for (const a of got) expect(a.entries).toEqual(await store().getJournal(a.run.id));
      // The run's own fields come with it whatever the length of its journal.
      for (const a of got) expect(a.run.input).toEqual({ run: a.run.id });
      expect(got[2]!.entries).toHaveLength(5);
      expect(got[2]!.entries[0]).toEqual(step("r1", 0, "nil", null));
      expect("value" in got[2]!.entries[1]!).toBe(false);
      expect(got[0]!.entries).toEqual([]);
    });

    it("claimDueRuns with runIds takes only those runs, each only if due, in deadline order, with its journal", async () => {
      await startRun(store(), "r1");
      await store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 0)] });
      await store().park({ runId: "r1", owner: "inst-1", now: T0, entry: sleepEntry("r1", 1, T0 + 30) });
      await sleepingRun(store(), "r2", T0 + 20);
      await startRun(store(), "r3", { leaseMs: 10 });
      await sleepingRun(store(), "r4", T0 + 10_000);
      await sleepingRun(store(), "r5", T0 + 5);
      await startRun(store(), "r6");
      await store().finish({ runId: "r6", owner: "inst-1", now: T0, status: "completed" });
      await startRun(store(), "r7", { flow: "flow.other" });
      await store().park({ runId: "r7", owner: "inst-1", now: T0, entry: sleepEntry("r7", 0, T0 + 1) });
      const req = { owner: "inst-2", now: T0 + 100, max: 10, leaseMs: LEASE, flows: ["flow.a"] };
      const ids = ["r1", "r2", "r3", "r4", "r6", "r7", "ghost", "r1"];
      const got = await store().claimDueRuns({ ...req, runIds: ids });
      // r4 is not due, r5 is not asked for, r6 is finished, r7 is another flow's, ghost does not exist.
      expect(got.map((a) => a.run.id)).toEqual(["r3", "r2", "r1"]);
      for (const a of got) expect(a.entries).toEqual(await store().getJournal(a.run.id));
      for (const a of got)
        expect(a.run).toMatchObject({ status: "running", wakeAt: null, leaseOwner: "inst-2" });
      expect(got[2]!.entries).toEqual([step("r1", 0), sleepEntry("r1", 1, T0 + 30)]);
      expect(await store().getRun("r4")).toMatchObject({ status: "sleeping", wakeAt: T0 + 10_000 });
      expect(await store().getRun("r5")).toMatchObject({ status: "sleeping", wakeAt: T0 + 5 });
      expect(await store().getRun("r7")).toMatchObject({ status: "sleeping", wakeAt: T0 + 1 });
      // Taken: their leases are live, so asking again gets nothing; max still applies.
      expect(await store().claimDueRuns({ ...req, runIds: ["r1", "r2", "r3"] })).toEqual([]);
      expect(await store().claimDueRuns({ ...req, runIds: [] })).toEqual([]);
      await sleepingRun(store(), "r8", T0 + 1);
      const one = await store().claimDueRuns({ ...req, max: 1, runIds: ["r8", "r5"] });
      expect(one.map((a) => a.run.id)).toEqual(["r8"]);
      // Without flows, any flow's run among the ids.
      const other = await store().claimDueRuns({
        owner: "inst-3",
        now: T0 + 100,
        max: 10,
        leaseMs: LEASE,
        runIds: ["r7"],
      });
      expect(other.map((a) => a.run.id)).toEqual(["r7"]);
    });

    it("claimDueRuns with sleepersDueBy reserves sleepers due by then (lease taken, still sleeping), never takes a live lease early, and says when each is due", async () => {
      await sleepingRun(store(), "s1", T0 + 110);
      await sleepingRun(store(), "s2", T0 + 140);
      await sleepingRun(store(), "s3", T0 + 200);
      // A live lease lapsing inside the lookahead: not due until it lapses.
      await startRun(store(), "l1", { leaseMs: 120 });
      await startRun(store(), "l2", { leaseMs: 90 });
      const req = { owner: "inst-2", now: T0 + 100, max: 10, leaseMs: LEASE, sleepersDueBy: T0 + 150 };
      const scan = await store().claimDueRuns(req);
      // l2's lease lapsed at T0 + 90 (due then); l1's is live until T0 + 120, inside the lookahead.
      expect(scan.map((a) => [a.run.id, a.dueAt])).toEqual([
        ["l2", T0 + 90],
        ["s1", T0 + 110],
        ["s2", T0 + 140],
      ]);
      expect(scan[0]!.run).toMatchObject({ status: "running", wakeAt: null, leaseOwner: "inst-2" });
      // Sleepers not due yet are reserved: leased by the claimer, still sleeping with their wakeAt.
      expect(scan[1]!.run).toMatchObject({ status: "sleeping", wakeAt: T0 + 110, leaseOwner: "inst-2" });
      expect(await store().getRun("s2")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 140,
        leaseOwner: "inst-2",
        leaseExpiresAt: T0 + 100 + LEASE,
        recoveries: 0,
      });
      expect(sortedIds(await store().listRuns({ status: "sleeping" }))).toEqual(["s1", "s2", "s3"]);
      expect(await store().getRun("l1")).toMatchObject({ status: "running", leaseOwner: "inst-1" });
      expect(await store().getRun("s3")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 200,
        leaseOwner: null,
      });
      // By id: the same rule.
      await sleepingRun(store(), "s4", T0 + 150);
      const byId = await store().claimDueRuns({ ...req, runIds: ["l1", "s3", "s4"] });
      expect(byId.map((a) => [a.run.id, a.dueAt])).toEqual([["s4", T0 + 150]]);
      // A sleepersDueBy before now counts as now; without it, nothing is due before its deadline.
      expect(await store().claimDueRuns({ ...req, sleepersDueBy: T0, runIds: ["l1", "s3"] })).toEqual([]);
      // Another claimer past the wake times skips the live reservations (s1, s2, s4).
      const late = await store().claimDueRuns({ owner: "inst-3", now: T0 + 200, max: 10, leaseMs: LEASE });
      expect(late.map((a) => [a.run.id, a.dueAt])).toEqual([
        ["l1", T0 + 120],
        ["s3", T0 + 200],
      ]);
      // The holder's own claim resumes its reservation: running, even before the wake time.
      const own = await store().claimDueRuns({
        owner: "inst-2",
        now: T0 + 105,
        max: 1,
        leaseMs: LEASE,
        runIds: ["s1"],
        sleepersDueBy: T0 + 110,
      });
      expect(own.map((a) => a.run)).toMatchObject([
        { id: "s1", status: "running", wakeAt: null, leaseOwner: "inst-2", recoveries: 0 },
      ]);
      // A released reservation is a plain sleeper again.
      await store().releaseRun({ runId: "s2", owner: "inst-2", now: T0 + 110, retryAt: T0 + 140 });
      expect(await store().getRun("s2")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 140,
        leaseOwner: null,
      });
      // A lapsed reservation (its holder died) is a due sleeper: taken. s2 was given back (no
      // recovery); s4's holder held it past its wake time and may have run the step after the sleep
      // (one recovery: wake-recovery-cases.ts).
      const after = T0 + 100 + LEASE + 1;
      const lapsed = await store().claimDueRuns({
        owner: "inst-4",
        now: after,
        max: 10,
        leaseMs: LEASE,
        runIds: ["s2", "s4"],
      });
      expect(lapsed.map((a) => a.run)).toMatchObject([
        { id: "s2", status: "running", leaseOwner: "inst-4", recoveries: 0 },
        { id: "s4", status: "running", leaseOwner: "inst-4", recoveries: 1 },
      ]);
    });

    it("claimDueRuns with runIds: concurrent claimers of one run, one wins", async () => {
      await sleepingRun(store(), "r1", T0 + 10);
      const got = await Promise.all(
        [1, 2, 3, 4].map((n) =>
          store().claimDueRuns({ owner: `inst-${n}`, now: T0 + 10, max: 1, leaseMs: LEASE, runIds: ["r1"] }),
        ),
      );
      expect(got.flat().map((a) => a.run.id)).toEqual(["r1"]);
      const winner = got.flat()[0]!.run.leaseOwner;
      expect(await store().getRun("r1")).toMatchObject({ status: "running", leaseOwner: winner });
    });

    it("each due run is claimed once across concurrent claimers, max respected", async () => {
      for (let i = 0; i < 10; i++) await sleepingRun(store(), `r${i}`, T0 + 10 * i);
      const seen: string[] = [];
      for (let round = 0; round < 10; round++) {
        const batches = await Promise.all(
          [1, 2, 3, 4, 5].map((n) =>
            store().claimDueRuns({ owner: `inst-${n}`, now: T0 + 1_000, max: 1, leaseMs: LEASE }),
          ),
        );
        for (const b of batches) expect(b.length).toBeLessThanOrEqual(1);
        const got = batches.flat();
        if (got.length === 0) break;
        for (const a of got) seen.push(a.run.id);
      }
      expect([...seen].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`).sort());
      // Nothing sleeps any more; the next deadline is the claimers' lease expiry.
      expect(await store().nextWakeAt()).toBe(T0 + 1_000 + LEASE);
    });

    it("wakeEarly moves a sleeping run's wakeAt to now; false for missing, running and finished runs", async () => {
      await sleepingRun(store(), "r1", T0 + 3 * 86_400_000);
      expect(await store().wakeEarly("r1", T0 + 5)).toBe(true);
      expect(await store().getRun("r1")).toMatchObject({ status: "sleeping", wakeAt: T0 + 5 });
      expect(await store().nextWakeAt()).toBe(T0 + 5);
      expect(
        (await store().claimDueRuns({ owner: "inst-2", now: T0 + 5, max: 10, leaseMs: LEASE })).map(
          (a) => a.run.id,
        ),
      ).toEqual(["r1"]);
      expect(await store().wakeEarly("r1", T0 + 6)).toBe(false);
      expect(await store().wakeEarly("ghost", T0 + 6)).toBe(false);
      await store().finish({ runId: "r1", owner: "inst-2", now: T0 + 7, status: "completed" });
      expect(await store().wakeEarly("r1", T0 + 8)).toBe(false);
    });

    it("listOrphans: running without a live lease and every sleeping run", async () => {
      await startRun(store(), "live", { leaseMs: LEASE });
      await startRun(store(), "expired", { leaseMs: 100 });
      await startRun(store(), "released");
      await store().releaseRun({ runId: "released", owner: "inst-1", now: T0 });
      await sleepingRun(store(), "sleeper", T0 + 86_400_000);
      await startRun(store(), "done");
      await store().finish({ runId: "done", owner: "inst-1", now: T0, status: "completed" });
      await startRun(store(), "broken");
      await store().finish({
        runId: "broken",
        owner: "inst-1",
        now: T0,
        status: "failed",
        error: { code: "E", message: "x" },
      });
      expect(sortedIds(await store().listOrphans(T0 + 100))).toEqual(["expired", "released", "sleeper"]);
      expect(sortedIds(await store().listOrphans(T0 + 99))).toEqual(["released", "sleeper"]);
      expect(await store().listOrphans(T0 + 100, 2)).toHaveLength(2);
    });

    it("listOrphans lists running orphans before sleepers, so a caller can page over them", async () => {
      await sleepingRun(store(), "old-sleeper", T0 + 86_400_000);
      await startRun(store(), "late-orphan", { leaseMs: 100 });
      expect((await store().listOrphans(T0 + 100, 1)).map((r) => r.id)).toEqual(["late-orphan"]);
      expect((await store().listOrphans(T0 + 100)).map((r) => r.status)).toEqual(["running", "sleeping"]);
    });

    it("nextWakeAt is the earliest wakeAt among sleeping runs, or null", async () => {
      expect(await store().nextWakeAt()).toBeNull();
      await sleepingRun(store(), "r1", T0 + 500);
      await sleepingRun(store(), "r2", T0 + 300);
      await sleepingRun(store(), "r3", T0 + 400);
      expect(await store().nextWakeAt()).toBe(T0 + 300);
      await store().claimDueRuns({ owner: "inst-2", now: T0 + 300, max: 10, leaseMs: LEASE });
      expect(await store().nextWakeAt()).toBe(T0 + 400);
    });

    it("finish stores output or error, sets the terminal status and releases the lease", async () => {
      await startRun(store(), "ok");
      await store().finish({
        runId: "ok",
        owner: "inst-1",
        now: T0 + 9,
        status: "completed",
        output: { trialId: "t1" },
      });
      expect(await store().getRun("ok")).toMatchObject({
        status: "completed",
        output: { trialId: "t1" },
        leaseOwner: null,
        leaseExpiresAt: null,
        updatedAt: T0 + 9,
      });
      await startRun(store(), "ko");
      await store().finish({
        runId: "ko",
        owner: "inst-1",
        now: T0,
        status: "failed",
        error: { code: "OKE9", message: "boom" },
      });
      expect(await store().getRun("ko")).toMatchObject({
        status: "failed",
        error: { code: "OKE9", message: "boom" },
      });
    });

    it("finish by a non-holder is refused and changes nothing", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(
        store().finish({ runId: "r1", owner: "inst-2", now: T0, status: "completed", output: 1 }),
        "r1",
      );
      const run = await store().getRun("r1");
      expect(run).toMatchObject({ status: "running", leaseOwner: "inst-1" });
      expect(run?.output).toBeUndefined();
    });

    it("listRuns filters by status and flow and respects limit", async () => {
      await startRun(store(), "a1", { flow: "flow.a" });
      await startRun(store(), "a2", { flow: "flow.a", now: T0 + 1 });
      await startRun(store(), "b1", { flow: "flow.b", now: T0 + 2 });
      await sleepingRun(store(), "b2", T0 + 1_000, { flow: "flow.b", now: T0 + 3 });
      await store().finish({ runId: "a2", owner: "inst-1", now: T0 + 4, status: "completed" });
      expect(sortedIds(await store().listRuns({}))).toEqual(["a1", "a2", "b1", "b2"]);
      expect(sortedIds(await store().listRuns({ flow: "flow.a" }))).toEqual(["a1", "a2"]);
      expect(sortedIds(await store().listRuns({ status: "running" }))).toEqual(["a1", "b1"]);
      expect(sortedIds(await store().listRuns({ status: "sleeping", flow: "flow.b" }))).toEqual(["b2"]);
      expect(sortedIds(await store().listRuns({ status: "completed", flow: "flow.b" }))).toEqual([]);
      expect(await store().listRuns({ flow: "flow.none" })).toEqual([]);
      expect(await store().listRuns({ limit: 3 })).toHaveLength(3);
    });
  });
  // Wired here so every driver's suite (suite.ts calls journalParkCases) runs them.
  wakeRecoveryCases(factory);
}
