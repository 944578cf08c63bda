// The holder's claim of its own reservation on postgres waits for a concurrent writer of the row (a wake early) instead of coming back empty.
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { LEASE, sleepingRun, T0 } from "../conformance/harness.ts";
import type { AcquiredRun } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

/**
 * A run reserved ahead of its wake resumes with the code after the sleep running while the claim
 * that sets it running is on its way (durable-runtime's reservedStart). A wake early landing then
 * held the row lock; the claim's SKIP LOCKED skipped the row, so it came back empty, the holder's
 * writes were refused, and the step after the sleep ran again once the lease lapsed. The test holds
 * the wake early's UPDATE open in a transaction while the claim runs, so the race is certain.
 */
/** A store on a fresh schema (no poll ticks), and a second connection to hold row locks with. */
async function storeWithAdmin(name: string) {
  const schema = freshSchema(name);
  const store = await openStore(schema, { pollIntervalMs: 3_600_000 });
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  onTestFinished(async () => {
    await admin.end();
    await store.close();
    await dropSchema(schema);
  });
  return { schema, store, admin };
}

describe("postgres: the claim of a holder's own reservation", () => {
  it("waits for a wake early holding the row and then takes the run, instead of finding nothing", async () => {
    const { schema, store, admin } = await storeWithAdmin("resclaim");
    await sleepingRun(store, "s1", T0 + 110);
    const reserved = await store.claimDueRuns({
      owner: "inst-2",
      now: T0 + 100,
      max: 1,
      leaseMs: LEASE,
      sleepersDueBy: T0 + 150,
    });
    expect(reserved.map((a) => a.run)).toMatchObject([
      { id: "s1", status: "sleeping", leaseOwner: "inst-2" },
    ]);

    // wakeEarly's UPDATE, its transaction left open.
    await admin.query("BEGIN");
    await admin.query(
      `UPDATE "${schema}".runs SET wake_at = LEAST(wake_at, $2), updated_at = $2 WHERE id = $1`,
      ["s1", T0 + 105],
    );
    let settled = false;
    const claim = store
      .claimDueRuns({
        owner: "inst-2",
        now: T0 + 110,
        max: 1,
        leaseMs: LEASE,
        runIds: ["s1"],
        sleepersDueBy: T0 + 110,
      })
      .finally(() => {
        settled = true;
      });
    // Until the claim either answered (it did not wait) or waits for the row lock.
    const { pid } = (await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!;
    for (;;) {
      if (settled) break;
      const { rows } = await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY (pg_blocking_pids(pid))`,
        [pid],
      );
      if (Number(rows[0]!.n) > 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await admin.query("COMMIT");
    const got: AcquiredRun[] = await claim;
    expect(got.map((a) => a.run)).toMatchObject([
      { id: "s1", status: "running", leaseOwner: "inst-2", wakeAt: null, recoveries: 0 },
    ]);
    expect(await store.getRun("s1")).toMatchObject({ status: "running", leaseOwner: "inst-2" });
  });

  it("a claim by id of runs reserved by another owner still skips a locked row (never waits)", async () => {
    const { schema, store, admin } = await storeWithAdmin("resclaim2");
    await sleepingRun(store, "s1", T0 + 110);
    await admin.query("BEGIN");
    await admin.query(`SELECT 1 FROM "${schema}".runs WHERE id = 's1' FOR UPDATE`);
    const got = await store.claimDueRuns({
      owner: "inst-3",
      now: T0 + 200,
      max: 1,
      leaseMs: LEASE,
      runIds: ["s1"],
    });
    await admin.query("COMMIT");
    expect(got).toEqual([]);
  });
});
