// A run claim on postgres returns the journal as it stands when the claim takes the run, including an append that committed while the claim statement was already running.
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import type { ClaimDueRunsRequest, JournalEntry, Store } from "../types.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

/**
 * Under READ COMMITTED a claim statement reads in the snapshot it took when it began. When the run's
 * row is updated and committed after that but before the claim locks it, PostgreSQL re-checks the
 * claim's condition against the newest row version (EvalPlanQual) and takes it, while the rest of
 * the statement, the journal join included, still reads the older snapshot. To make that window
 * certain rather than rare, the claiming store runs as a role whose row-level-security policy on
 * `runs` waits on an advisory lock while the claim scans: the test holds the lock, lets the holder
 * append, then releases it.
 */
const ROLE = "oke_claim_stall";
const GATE = 424_242;

async function stalledClaimer(schema: string): Promise<Store> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${ROLE}') THEN CREATE ROLE ${ROLE} NOLOGIN; END IF;
    END $$`);
    await admin.query(`CREATE FUNCTION "${schema}".gate(id text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
      BEGIN
        IF id = 'r1' THEN PERFORM pg_advisory_lock_shared(${GATE}); PERFORM pg_advisory_unlock_shared(${GATE}); END IF;
        RETURN true;
      END $$`);
    await admin.query(`GRANT USAGE ON SCHEMA "${schema}" TO ${ROLE}`);
    await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA "${schema}" TO ${ROLE}`);
    await admin.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "${schema}" TO ${ROLE}`);
    await admin.query(`ALTER TABLE "${schema}".runs ENABLE ROW LEVEL SECURITY`);
    await admin.query(`CREATE POLICY stall ON "${schema}".runs TO ${ROLE} USING ("${schema}".gate(id))`);
  } finally {
    await admin.end();
  }
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const store = createPostgresStore({
    pool,
    connectionString: PG_URL,
    schema,
    notify: false,
    pollIntervalMs: 3_600_000,
  });
  await store.open();
  // After open (its migration check needs the owner's rights); the pool's one connection keeps it.
  await pool.query(`SET ROLE ${ROLE}`);
  onTestFinished(async () => {
    await store.close();
    await pool.end();
  });
  return store;
}

const step = (seq: number, at: number): JournalEntry => ({
  runId: "r1",
  seq,
  kind: "step",
  name: `s${seq}`,
  value: seq,
  at,
});

/**
 * A store on a fresh schema (dropped when the case ends) holding run r1 of flow f: started by o1 at
 * 100 with a 1 s lease, `entries` journaled at 200.
 */
async function holderOfR1(
  tag: string,
  input: unknown,
  entries: JournalEntry[],
): Promise<{ schema: string; holder: Store }> {
  const schema = freshSchema(tag);
  const holder = await openStore(schema, { pollIntervalMs: 3_600_000 });
  onTestFinished(async () => {
    await holder.close();
    await dropSchema(schema);
  });
  await holder.startRun({
    id: "r1",
    flow: "f",
    input,
    parentRunId: null,
    owner: "o1",
    now: 100,
    leaseMs: 1_000,
  });
  await holder.append({ runId: "r1", owner: "o1", now: 200, leaseMs: 1_000, entries });
  return { schema, holder };
}

/** Waits until a backend is blocked on the gate's advisory lock (the claim is inside its scan). */
async function untilWaitingOnGate(admin: pg.Client): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`,
      [GATE],
    );
    if (Number(rows[0]!.n) > 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("the claim never reached the gate");
}

describe("postgres: a claim reads the journal after it has taken the run", () => {
  for (const byId of [false, true])
    it(`an append that commits between the claim's snapshot and its lock is in the claimed journal (${byId ? "claim by id" : "scan"})`, async () => {
      const { schema, holder } = await holderOfR1("claimsnap", null, [step(0, 200)]);
      const claimer = await stalledClaimer(schema);

      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      onTestFinished(() => admin.end());
      await admin.query("SELECT pg_advisory_lock($1)", [GATE]);
      // The holder's lease (to 1 200) has lapsed at 5 000: the claim finds the run due.
      const req: ClaimDueRunsRequest = { owner: "o2", now: 5_000, max: 5, leaseMs: 1_000, flows: ["f"] };
      const claimed = claimer.claimDueRuns(byId ? { ...req, runIds: ["r1"] } : req);
      await untilWaitingOnGate(admin);
      // A slow holder still holds the run (nobody took it yet) and journals its next step; the lease
      // it renews to (4 500) is already past at the claimer's 5 000, so the re-check still passes.
      await holder.append({
        runId: "r1",
        owner: "o1",
        now: 3_500,
        leaseMs: 1_000,
        entries: [step(1, 3_500)],
      });
      await admin.query("SELECT pg_advisory_unlock($1)", [GATE]);

      const [taken, ...rest] = await claimed;
      expect(rest).toEqual([]);
      expect(taken!.run).toMatchObject({ id: "r1", leaseOwner: "o2", status: "running" });
      // Without the second read the claim returned [0]: the taker would run step 1 again.
      expect(taken!.entries.map((e) => e.seq)).toEqual([0, 1]);
      // The former holder is fenced out from here on.
      await expect(
        holder.append({ runId: "r1", owner: "o1", now: 5_100, leaseMs: 1_000, entries: [step(2, 5_100)] }),
      ).rejects.toThrow();
      expect((await holder.getJournal("r1")).map((e) => e.seq)).toEqual([0, 1]);
    });

  it("a claim with nothing written meanwhile reads the journal in its one statement", async () => {
    const { holder: store } = await holderOfR1("claimsnap1", { a: 1 }, [step(0, 200), step(1, 200)]);
    const [taken] = await store.claimDueRuns({ owner: "o2", now: 5_000, max: 5, leaseMs: 1_000 });
    expect(taken!.run).toMatchObject({ id: "r1", leaseOwner: "o2", input: { a: 1 }, recoveries: 1 });
    expect(taken!.entries.map((e) => e.seq)).toEqual([0, 1]);
  });
});
