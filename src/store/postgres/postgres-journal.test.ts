// The postgres journal across instances: fencing, leases, group commit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JournalLeaseBusy } from "../../errors.ts";
import type { Store } from "../types.ts";
import pg from "pg";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const T0 = 1_700_000_000_000;
const LEASE = 30_000;

describe("postgres journal across instances", () => {
  const schema = freshSchema("journal");
  const stores: Store[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 4; i++)
      stores.push(await openStore(schema, { poolSize: 2, pollIntervalMs: 3_600_000 }));
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    await dropSchema(schema);
  });
  /** A store on a pool whose queries are counted, to see the batches; `close` ends both. */
  const countingStore = async () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
    const counter = { queries: 0 };
    const query = pool.query.bind(pool);
    pool.query = ((...args: Parameters<typeof query>) => {
      counter.queries++;
      return query(...args);
    }) as typeof pool.query;
    const store = await openStore(schema, { pool, pollIntervalMs: 3_600_000 });
    const close = async (): Promise<void> => {
      await store.close();
      await pool.end();
    };
    return { store, counter, close };
  };
  const start = (id: string, owner = "inst-0", now = T0) =>
    stores[0]!.startRun({ id, flow: "f", input: { id }, parentRunId: null, owner, now, leaseMs: LEASE });

  it("entries and emits are one statement: a duplicate emitted id rolls the entries back too", async () => {
    await start("r-dup");
    await stores[0]!.enqueue([{ id: "taken", signal: "s", key: null, payload: 1, parentRunId: null }], T0);
    await expect(
      stores[1]!.append({
        runId: "r-dup",
        owner: "inst-0",
        now: T0,
        entries: [{ runId: "r-dup", seq: 0, kind: "step", name: "a", value: 1, at: T0 }],
        emits: [
          { id: "fresh", signal: "s", key: null, payload: 2, parentRunId: "r-dup" },
          { id: "taken", signal: "s", key: null, payload: 3, parentRunId: "r-dup" },
        ],
      }),
    ).rejects.toMatchObject({ code: "OKE1261", message: 'store: message "taken" already exists' });
    expect(await stores[2]!.getJournal("r-dup")).toEqual([]);
    expect(await stores[2]!.getMessage("fresh")).toBeUndefined();
    expect(await stores[2]!.getRun("r-dup")).toMatchObject({ updatedAt: T0, leaseExpiresAt: T0 + LEASE });
  });

  it("concurrent appends of many runs share statements; each caller gets its own outcome", async () => {
    const { store: grouped, counter, close } = await countingStore();
    const ids = Array.from({ length: 40 }, (_, i) => `r-grp-${i}`);
    for (const id of ids) await start(id);
    await start("r-grp-dup");
    const entry = (runId: string, seq: number, value: unknown) => ({
      runId,
      seq,
      kind: "step" as const,
      name: `s${seq}`,
      value,
      at: T0 + 1,
    });
    try {
      // Round 1, all at once: the first two go alone, the rest share batch statements. A stale
      // holder (at another seq) and an unknown run ride in the same batch and are refused.
      counter.queries = 0;
      const round1 = await Promise.allSettled([
        ...ids.map((id, i) =>
          grouped.append({
            runId: id,
            owner: "inst-0",
            now: T0 + 1,
            entries: [entry(id, 0, { i })],
            leaseMs: LEASE,
          }),
        ),
        grouped.append({
          runId: "r-grp-39",
          owner: "intruder",
          now: T0 + 1,
          entries: [entry("r-grp-39", 1, "x")],
        }),
        grouped.append({
          runId: "r-grp-ghost",
          owner: "inst-0",
          now: T0 + 1,
          entries: [entry("r-grp-ghost", 0, 1)],
        }),
      ]);
      // 42 appends: a handful of statements, plus one status lookup per refusal.
      expect(counter.queries).toBeLessThan(10);
      expect(round1.slice(0, ids.length).every((r) => r.status === "fulfilled")).toBe(true);
      const [intruder, ghost] = round1.slice(ids.length).map((r) => (r as PromiseRejectedResult).reason);
      expect(intruder).toBeInstanceOf(JournalLeaseBusy);
      expect(ghost).toMatchObject({ code: "OKE1311" });
      for (const [i, id] of ids.entries()) {
        expect(await stores[1]!.getJournal(id)).toEqual([expect.objectContaining({ seq: 0, value: { i } })]);
        expect(await stores[1]!.getRun(id)).toMatchObject({
          updatedAt: T0 + 1,
          leaseExpiresAt: T0 + 1 + LEASE,
        });
      }

      // Round 2: one caller's duplicate seq (another entry at that seq) fails that caller only.
      await stores[0]!.append({
        runId: "r-grp-dup",
        owner: "inst-0",
        now: T0,
        entries: [entry("r-grp-dup", 0, 0)],
      });
      const round2 = await Promise.allSettled([
        ...ids.map((id) =>
          grouped.append({ runId: id, owner: "inst-0", now: T0 + 2, entries: [entry(id, 1, 1)] }),
        ),
        grouped.append({
          runId: "r-grp-dup",
          owner: "inst-0",
          now: T0 + 2,
          entries: [{ ...entry("r-grp-dup", 0, 1), name: "other" }],
        }),
      ]);
      expect(round2.slice(0, ids.length).every((r) => r.status === "fulfilled")).toBe(true);
      expect((round2.at(-1) as PromiseRejectedResult).reason).toMatchObject({
        code: "OKE1312",
        message: 'journal: run "r-grp-dup" already has an entry at seq 0',
      });
      expect((await stores[1]!.getJournal("r-grp-7")).map((e) => e.seq)).toEqual([0, 1]);
      expect(await stores[1]!.getJournal("r-grp-dup")).toEqual([expect.objectContaining({ value: 0 })]);
    } finally {
      await close();
    }
  });

  it("concurrent finishes of many runs share statements; a stale holder's is refused", async () => {
    const { store: grouped, counter, close } = await countingStore();
    const ids = Array.from({ length: 30 }, (_, i) => `r-fin-${i}`);
    for (const id of ids) await start(id);
    try {
      counter.queries = 0;
      const results = await Promise.allSettled([
        ...ids.map((id, i) =>
          grouped.finish(
            i % 2 === 0
              ? { runId: id, owner: "inst-0", now: T0 + 5, status: "completed", output: { i } }
              : {
                  runId: id,
                  owner: "inst-0",
                  now: T0 + 5,
                  status: "failed",
                  error: { code: "E", message: `m${i}` },
                },
          ),
        ),
        grouped.finish({
          runId: "r-fin-29",
          owner: "intruder",
          now: T0 + 5,
          status: "completed",
          output: "x",
        }),
      ]);
      expect(counter.queries).toBeLessThan(8);
      expect(results.slice(0, ids.length).every((r) => r.status === "fulfilled")).toBe(true);
      expect((results.at(-1) as PromiseRejectedResult).reason).toBeInstanceOf(JournalLeaseBusy);
      for (const [i, id] of ids.entries()) {
        expect(await stores[1]!.getRun(id)).toMatchObject(
          i % 2 === 0
            ? { status: "completed", output: { i }, leaseOwner: null, updatedAt: T0 + 5 }
            : { status: "failed", error: { code: "E", message: `m${i}` }, leaseOwner: null },
        );
      }
    } finally {
      await close();
    }
  });

  it("concurrent starts share an INSERT; an existing id takes the acquire path", async () => {
    const { store: grouped, counter, close } = await countingStore();
    await start("r-st-busy"); // running, lease held by inst-0
    const ids = Array.from({ length: 30 }, (_, i) => `r-st-${i}`);
    const req = (id: string, owner: string) => ({
      id,
      flow: "f",
      input: { id },
      parentRunId: null,
      owner,
      now: T0 + 1,
      leaseMs: LEASE,
    });
    try {
      counter.queries = 0;
      const results = await Promise.allSettled([
        ...ids.map((id) => grouped.startRun(req(id, "inst-9"))),
        grouped.startRun(req("r-st-busy", "inst-9")),
        grouped.startRun(req("r-st-29", "inst-8")), // same id as one in the batch: the first one wins
      ]);
      expect(counter.queries).toBeLessThan(10);
      for (const [i, r] of results.slice(0, ids.length).entries()) {
        expect(r).toMatchObject({
          status: "fulfilled",
          value: {
            created: true,
            entries: [],
            run: { id: ids[i], leaseOwner: "inst-9", input: { id: ids[i] } },
          },
        });
      }
      expect((results[ids.length] as PromiseRejectedResult).reason).toBeInstanceOf(JournalLeaseBusy);
      expect((results[ids.length + 1] as PromiseRejectedResult).reason).toBeInstanceOf(JournalLeaseBusy);
      expect(await stores[1]!.getRun("r-st-busy")).toMatchObject({ leaseOwner: "inst-0" });
      expect(await stores[1]!.getRun("r-st-29")).toMatchObject({ leaseOwner: "inst-9", status: "running" });
    } finally {
      await close();
    }
  });

  it("null and absent values stay distinct through the journal", async () => {
    await start("r-null");
    await stores[0]!.append({
      runId: "r-null",
      owner: "inst-0",
      now: T0,
      entries: [
        { runId: "r-null", seq: 0, kind: "step", name: "null", value: null, at: T0 },
        { runId: "r-null", seq: 1, kind: "step", name: "absent", at: T0 },
      ],
    });
    const [withNull, absent] = await stores[1]!.getJournal("r-null");
    expect(withNull).toHaveProperty("value", null);
    expect(absent).not.toHaveProperty("value");
    await stores[0]!.finish({ runId: "r-null", owner: "inst-0", now: T0, status: "completed", output: null });
    expect(await stores[1]!.getRun("r-null")).toHaveProperty("output", null);
  });

  it("instances racing for one expired run: exactly one acquires it, the rest get JournalLeaseBusy", async () => {
    await start("r-race");
    const results = await Promise.allSettled(
      stores.flatMap((s, i) =>
        [0, 1].map((j) =>
          s.acquireRun({ runId: "r-race", owner: `inst-${i}-${j}`, now: T0 + LEASE, leaseMs: LEASE }),
        ),
      ),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const r of results)
      if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "JournalLeaseBusy" });
  });

  it("claimDueRuns from four instances at once hands each due run to exactly one", async () => {
    for (let i = 0; i < 40; i++) {
      const id = `sleeper-${String(i).padStart(2, "0")}`;
      await start(id);
      await stores[0]!.park({
        runId: id,
        owner: "inst-0",
        now: T0,
        entry: {
          runId: id,
          seq: 0,
          kind: "sleep",
          label: "nap",
          duration: "1s",
          wakeAt: T0 + 1_000 + i,
          at: T0,
        },
      });
    }
    const batches = await Promise.all(
      stores.flatMap((s, i) =>
        [0, 1, 2].map((j) =>
          s.claimDueRuns({ owner: `c-${i}-${j}`, now: T0 + 5_000, max: 7, leaseMs: LEASE }),
        ),
      ),
    );
    const ids = batches.flat().map((a) => a.run.id);
    expect(ids.filter((id) => id.startsWith("sleeper-")).sort()).toEqual(
      Array.from({ length: 40 }, (_, i) => `sleeper-${String(i).padStart(2, "0")}`),
    );
    expect(new Set(ids).size).toBe(ids.length);
    for (const b of batches) expect(b.length).toBeLessThanOrEqual(7);
  });
});
