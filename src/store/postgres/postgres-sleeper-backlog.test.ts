// Postgres with a backlog of sleepers: a claim of due runs (migration 0027) and the boot's orphan scan read about a page of rows, not the backlog, in the documented order.
import { describe, expect, it } from "vitest";
import { storeOnOneConnection } from "./test-support.ts";

/** One node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan tree. */
interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
}

/** Rows each scan of `runs` in `plan` produced or filtered out, summed over its loops. */
function runsRowsRead(plan: PlanNode): number {
  const own =
    plan["Relation Name"] === "runs"
      ? (plan["Actual Rows"] + (plan["Rows Removed by Filter"] ?? 0)) * plan["Actual Loops"]
      : 0;
  return own + (plan.Plans ?? []).reduce((n, p) => n + runsRowsRead(p), 0);
}

const DUE = 20_000;

/** The plans auto_explain reports on the store's session, as JSON, while `run` runs. */
async function explained(
  pool: import("pg").Pool,
  plans: string[],
  run: () => Promise<unknown>,
): Promise<PlanNode[]> {
  await pool.query("LOAD 'auto_explain'");
  await pool.query(
    "SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_format = json; SET auto_explain.log_level = notice",
  );
  plans.length = 0;
  await run();
  await pool.query("SET auto_explain.log_min_duration = -1");
  return plans
    .filter((p) => p.includes('"Plan"'))
    .map((p) => (JSON.parse(p.slice(p.indexOf("{"))) as { Plan: PlanNode }).Plan);
}

describe("postgres: a backlog of sleepers", () => {
  it(`takes the ${5} earliest of ${DUE} due sleepers (a cohort due at one instant: ties by id) reading a few rows, not the backlog`, async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("dueclaim", {
      onNotice: (n) => plans.push(n),
    });
    const s = `"${schema}"`;
    // A cohort due at 1 000 (ids in reverse of their insertion, so the heap order is not the id
    // order), two earlier sleepers of the flow, one of another flow, one not yet due, a running run
    // whose lease lapsed at 1 500, and 5 000 parked for later.
    await pool.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, wake_at, created_at, updated_at)
       SELECT 'c' || lpad((${DUE} - g)::text, 6, '0'), 'f', 'sleeping', 'null'::jsonb, NULL::text, NULL::bigint, 1000::bigint, 1, 1
         FROM generate_series(1, ${DUE}) g
       UNION ALL SELECT 'early-b', 'f', 'sleeping', 'null'::jsonb, NULL, NULL, 900, 1, 1
       UNION ALL SELECT 'early-a', 'f', 'sleeping', 'null'::jsonb, NULL, NULL, 900, 1, 1
       UNION ALL SELECT 'other', 'g', 'sleeping', 'null'::jsonb, NULL, NULL, 10, 1, 1
       UNION ALL SELECT 'later', 'f', 'sleeping', 'null'::jsonb, NULL, NULL, 5000, 1, 1
       UNION ALL SELECT 'lapsed', 'f', 'running', 'null'::jsonb, 'dead', 1500, NULL, 1, 1
       UNION ALL SELECT 'p' || g, 'f', 'sleeping', 'null'::jsonb, NULL, NULL, 10000000 + g, 1, 1
         FROM generate_series(1, 5000) g`,
    );
    await pool.query(`ANALYZE ${s}.runs`);
    const claim = (max: number) =>
      store.claimDueRuns({ owner: "o", now: 2_000, max, leaseMs: 1_000, flows: ["f"] });
    let first: Awaited<ReturnType<typeof claim>> = [];
    const plan = await explained(pool, plans, async () => (first = await claim(5)));
    expect(first.map((a) => a.run.id)).toEqual(["early-a", "early-b", "c000000", "c000001", "c000002"]);
    expect(first.map((a) => a.dueAt)).toEqual([900, 900, 1_000, 1_000, 1_000]);
    expect(plan).toHaveLength(1);
    // The backlog is 20 002 due sleepers; before 0027 every one of them was read and sorted.
    const read = runsRowsRead(plan[0]!);
    expect(read).toBeGreaterThanOrEqual(5);
    expect(read).toBeLessThan(100);

    // The rest of the cohort in order, the lapsed lease at its place (1 500), never the other flow's
    // sleeper or one not yet due.
    // A flow named twice is probed once.
    const twice = await store.claimDueRuns({
      owner: "o",
      now: 2_000,
      max: 2,
      leaseMs: 1_000,
      flows: ["f", "f"],
    });
    expect(twice.map((a) => a.run.id)).toEqual(["c000003", "c000004"]);
    const rest = await claim(DUE);
    expect(rest).toHaveLength(DUE - 5 + 1);
    expect(rest.slice(0, 2).map((a) => a.run.id)).toEqual(["c000005", "c000006"]);
    expect(rest.at(-2)!.run.id).toBe(`c${String(DUE - 1).padStart(6, "0")}`);
    expect(rest.at(-1)!.run).toMatchObject({ id: "lapsed", status: "running", leaseOwner: "o" });
    expect(await claim(5)).toEqual([]);
  });

  it("the boot's orphan scan takes a page: lapsed running runs first, then sleepers by creation, reading about a page of rows", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("orphans", {
      onNotice: (n) => plans.push(n),
    });
    const s = `"${schema}"`;
    await pool.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, wake_at, created_at, updated_at)
       SELECT 's' || lpad(g::text, 6, '0'), 'f', 'sleeping', 'null'::jsonb, NULL::text, NULL::bigint, 10000000::bigint, 1000 - g % 7, 1
         FROM generate_series(1, ${DUE}) g
       UNION ALL SELECT 'run-b', 'f', 'running', 'null'::jsonb, 'dead', 500, NULL, 2000, 1
       UNION ALL SELECT 'run-a', 'f', 'compensating', 'null'::jsonb, NULL, NULL, NULL, 3000, 1
       UNION ALL SELECT 'held', 'f', 'running', 'null'::jsonb, 'alive', 99999, NULL, 1, 1
       UNION ALL SELECT 'other', 'g', 'running', 'null'::jsonb, 'dead', 500, NULL, 1, 1`,
    );
    await pool.query(`ANALYZE ${s}.runs`);
    let page: Awaited<ReturnType<typeof store.listOrphans>> = [];
    const plan = await explained(
      pool,
      plans,
      async () => (page = await store.listOrphans(1_000, 4, { flows: ["f"] })),
    );
    // Running first (by creation), then the oldest sleepers: created_at 994 (g % 7 = 6), ties by id.
    expect(page.map((r) => r.id)).toEqual(["run-b", "run-a", "s000006", "s000013"]);
    expect(plan).toHaveLength(1);
    const read = runsRowsRead(plan[0]!);
    expect(read).toBeGreaterThanOrEqual(4);
    expect(read).toBeLessThan(100);
    expect((await store.listOrphans(1_000, undefined, { flows: ["f"] })).length).toBe(DUE + 2);
  });

  it("the next wake time reads the few sleepers up to the first free one, and counts a reservation whose lease lapses first", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("nextwake", {
      onNotice: (n) => plans.push(n),
    });
    const s = `"${schema}"`;
    // A cohort of sleepers due at 10 001; one reserved ahead (its wake at 5 000, its holder's lease
    // to 7 000): due to others at 7 000.
    await pool.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, wake_at, created_at, updated_at)
       SELECT 's' || g, 'f', 'sleeping', 'null'::jsonb, NULL::text, NULL::bigint, 10001::bigint, 1, 1
         FROM generate_series(1, ${DUE}) g
       UNION ALL SELECT 'reserved', 'f', 'sleeping', 'null'::jsonb, 'holder', 7000, 5000, 1, 1`,
    );
    await pool.query(`ANALYZE ${s}.runs`);
    let at: number | null = null;
    const plan = await explained(pool, plans, async () => (at = await store.nextWakeAt({ flows: ["f"] })));
    expect(at).toBe(7_000);
    expect(plan).toHaveLength(1);
    // Reservations are read in wake order up to the first free sleeper's wake, at most 1 024 of
    // them (RESERVED_READ): not the cohort of 20 000 due with it.
    expect(runsRowsRead(plan[0]!)).toBeLessThan(1_100);
    // The reservation gone, the first free sleeper.
    await pool.query(
      `UPDATE ${s}.runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = 'reserved'`,
    );
    expect(await store.nextWakeAt({ flows: ["f"] })).toBe(5_000);
    expect(await store.nextWakeAt()).toBe(5_000);
  });
});
