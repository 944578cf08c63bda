/** Conformance cases of the recovery count right after a wake: a holder that dies in the first step after a sleep is recovered like any other. */
import { describe, expect, it } from "vitest";
import type { AcquiredRun } from "../types.ts";
import { freshStore, LEASE, sleepingRun, T0, type StoreFactory } from "./harness.ts";

/** The sleeper every case parks: due at WAKE. */
const WAKE = T0 + 1_000;
/** How far ahead of WAKE a reservation is taken (a scheduler's lookahead). */
const AHEAD = 50;

/**
 * A run's recoveries when its holder dies between its wake and its next write: the wake's claim
 * may have taken the run (running, lease lapsed) or only reserved it (sleeping, its holder's
 * resuming claim not committed). Either way the holder may have run the step after the sleep, so
 * the next take counts one — else a step that kills its process right after a sleep is never
 * stopped by durable.maxRecoveries. Nothing can have run under a reservation that lapsed before
 * the wake time or one given back (releaseRun): no recovery.
 */
export function wakeRecoveryCases(factory: StoreFactory): void {
  describe("journal: recoveries after a wake", () => {
    const store = freshStore(factory);
    const recoveries = async (id: string): Promise<number | undefined> =>
      (await store().getRun(id))?.recoveries;
    /** Reserves `ids` for `owner` at `now`, before WAKE, as a scheduler with a lookahead does. */
    const reserve = async (
      owner: string,
      ids: string[],
      leaseMs = LEASE,
      now = WAKE - AHEAD,
    ): Promise<void> => {
      const got = await store().claimDueRuns({
        owner,
        now,
        max: 10,
        leaseMs,
        runIds: ids,
        sleepersDueBy: WAKE,
      });
      expect(got.map((a) => [a.run.id, a.run.status, a.run.leaseOwner, a.run.recoveries])).toEqual(
        [...ids].sort().map((id) => [id, "sleeping", owner, 0]),
      );
    };
    /** A take's result rows: id, status, holder, count. */
    const rows = (got: readonly AcquiredRun[]): unknown[] =>
      got.map((a) => [a.run.id, a.run.status, a.run.leaseOwner, a.run.recoveries]);

    it("woken when due (no lookahead), then its holder dies in the first step: the next take counts one", async () => {
      for (const id of ["byId", "scan"]) await sleepingRun(store(), id, WAKE);
      const woke = [
        ...(await store().claimDueRuns({ owner: "a", now: WAKE, max: 10, leaseMs: LEASE, runIds: ["byId"] })),
        ...(await store().claimDueRuns({ owner: "a", now: WAKE, max: 10, leaseMs: LEASE })),
      ];
      expect(rows(woke)).toEqual([
        ["byId", "running", "a", 0],
        ["scan", "running", "a", 0],
      ]);
      const scan = await store().claimDueRuns({ owner: "b", now: WAKE + LEASE, max: 10, leaseMs: LEASE });
      expect(rows(scan)).toEqual([
        ["byId", "running", "b", 1],
        ["scan", "running", "b", 1],
      ]);
    });

    it("reserved, then its holder dies past the wake time before its resuming claim commits: the next take counts one, through every kind of take", async () => {
      const ids = ["acquire", "byId", "lookahead", "scan"];
      for (const id of ids) await sleepingRun(store(), id, WAKE);
      await reserve("a", ids);
      // Still reserved (sleeping, a's lease) when a's lease lapses after the wake time.
      const lapsed = WAKE - AHEAD + LEASE;
      const acquired = await store().acquireRun({
        runId: "acquire",
        owner: "b",
        now: lapsed,
        leaseMs: LEASE,
      });
      const byId = await store().claimDueRuns({
        owner: "b",
        now: lapsed,
        max: 10,
        leaseMs: LEASE,
        runIds: ["byId"],
      });
      // A claimer with a lookahead of its own finds it due (its wake time passed) and takes it.
      const ahead = await store().claimDueRuns({
        owner: "b",
        now: lapsed,
        max: 10,
        leaseMs: LEASE,
        runIds: ["lookahead"],
        sleepersDueBy: lapsed + AHEAD,
      });
      const scan = await store().claimDueRuns({ owner: "b", now: lapsed, max: 10, leaseMs: LEASE });
      expect(rows([acquired, ...byId, ...ahead, ...scan])).toEqual(ids.map((id) => [id, "running", "b", 1]));
      for (const id of ids) expect(await recoveries(id)).toBe(1);
    });

    it("no recovery: a reservation that lapsed before the wake time, one given back, and the holder's own resume", async () => {
      for (const id of ["short", "again", "released", "own"]) await sleepingRun(store(), id, WAKE);
      // Reserved under a lease that ends before the wake: its holder never reached the wake under it.
      await reserve("a", ["again", "short"], AHEAD / 2);
      const woke = await store().claimDueRuns({
        owner: "b",
        now: WAKE,
        max: 10,
        leaseMs: LEASE,
        runIds: ["short"],
      });
      expect(rows(woke)).toEqual([["short", "running", "b", 0]]);
      // Reserved again by another lookahead claimer once that lease lapsed, then resumed by it.
      await reserve("b", ["again"], LEASE, WAKE - 10);
      const resumed = await store().claimDueRuns({
        owner: "b",
        now: WAKE,
        max: 10,
        leaseMs: LEASE,
        runIds: ["again"],
        sleepersDueBy: WAKE,
      });
      expect(rows(resumed)).toEqual([["again", "running", "b", 0]]);
      // Given back at a stop (the lease cleared), then woken after the old lease's time.
      await reserve("a", ["released", "own"]);
      await store().releaseRun({ runId: "released", owner: "a", now: WAKE - 10 });
      const taken = await store().claimDueRuns({
        owner: "c",
        now: WAKE + 2 * LEASE,
        max: 10,
        leaseMs: LEASE,
        runIds: ["released"],
      });
      expect(rows(taken)).toEqual([["released", "running", "c", 0]]);
      // The holder's own resuming claim at the wake.
      const own = await store().claimDueRuns({
        owner: "a",
        now: WAKE,
        max: 10,
        leaseMs: LEASE,
        runIds: ["own"],
        sleepersDueBy: WAKE,
      });
      expect(rows(own)).toEqual([["own", "running", "a", 0]]);
    });
  });
}
