// Real app processes on postgres: shared delivery, SIGKILLed handlers and runs taken over by another process.
import { describe, expect, it } from "vitest";
import { signal } from "../../src/index.ts";
import { useFleet } from "./fleet.ts";
import type { Child } from "./spawn.ts";

const fleet = useFleet({
  schema: `oke_proc_${process.pid}`,
  tables: [
    `CREATE TABLE $S.results (id bigserial PRIMARY KEY, n int NOT NULL, k text NOT NULL, pid int NOT NULL)`,
  ],
});
const { schema, children } = fleet;
const spawnChild = (env: Record<string, string>): Child => fleet.spawn(env);
const enqueue = (messages: Array<{ payload: unknown; key: string | null }>): Promise<void> =>
  fleet.enqueue("jobs.work", messages);

describe.sequential("real processes on one PostgreSQL", () => {
  it("three app processes share 10 000 messages: none runs twice and per-key order holds", async () => {
    const jobs = signal.once("jobs.work");
    expect(jobs.name).toBe("jobs.work");
    const procs = [0, 1, 2].map(() => spawnChild({ OKE_SCENARIO: "share", OKE_CONCURRENCY: "16" }));
    await Promise.all(procs.map((p) => p.waitFor((e) => e.event === "ready", "ready")));
    const messages: Array<{ payload: { n: number; k: string }; key: string | null }> = [];
    for (let n = 0; n < 10_000; n++) {
      const keyed = n % 2 === 0;
      const k = keyed ? `key-${n % 100}` : "none";
      messages.push({ payload: { n, k }, key: keyed ? k : null });
    }
    await enqueue(messages);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { rows } = await fleet.query<{ c: string }>(
        `SELECT count(*)::text AS c FROM "${schema}".results`,
      );
      if (Number(rows[0]!.c) >= 10_000) break;
      if (Date.now() > deadline) throw new Error(`only ${rows[0]!.c} of 10000 processed`);
      await new Promise((r) => setTimeout(r, 250));
    }
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    const { rows } = await fleet.query<{ n: number; k: string; pid: number }>(
      `SELECT n, k, pid FROM "${schema}".results ORDER BY id`,
    );
    expect(rows).toHaveLength(10_000);
    expect(new Set(rows.map((r) => r.n)).size).toBe(10_000);
    const lastPerKey = new Map<string, number>();
    for (const r of rows) {
      if (r.k === "none") continue;
      expect(r.n, `order within ${r.k}`).toBeGreaterThan(lastPerKey.get(r.k) ?? -1);
      lastPerKey.set(r.k, r.n);
    }
    // All three competed.
    expect(new Set(rows.map((r) => r.pid)).size).toBe(3);
  }, 120_000); // three processes on two shared cores: room for a loaded CI machine, not a speed target

  it("a process SIGKILLed mid-handler: its message is reclaimed by another after the lease", async () => {
    const leaseMs = "1500";
    const hung = spawnChild({ OKE_SCENARIO: "hang-then-work", OKE_HANG: "1", OKE_LEASE_MS: leaseMs });
    await hung.waitFor((e) => e.event === "ready", "ready");
    await enqueue([{ payload: { n: 7 }, key: null }]);
    await hung.waitFor((e) => e.event === "start" && e.n === 7, "claim");
    await hung.kill("SIGKILL");
    const healthy = spawnChild({ OKE_SCENARIO: "hang-then-work", OKE_LEASE_MS: leaseMs });
    const done = await healthy.waitFor((e) => e.event === "done" && e.n === 7, "reclaimed and done");
    // The second attempt, in the second process: no sweeper, the claim query took the lapsed lease
    // (waitFor's own timeout bounds the wait; how long it took is not asserted).
    expect(done.attempt).toBe(2);
    expect(done.pid).toBe(healthy.proc.pid);
    await healthy.kill("SIGTERM");
  });

  it("a durable run killed mid-step resumes in another process; step 1 ran exactly once", async () => {
    const id = `crash-${Date.now()}`;
    const first = spawnChild({
      OKE_SCENARIO: "durable",
      OKE_HANG: "1",
      OKE_INVOKE: id,
      OKE_LEASE_MS: "1500",
    });
    await first.waitFor((e) => e.event === "step-2", "step 2 started");
    await first.kill("SIGKILL");
    // Started while the dead process's lease may still be live: its wake scheduler takes the run over
    // when that lease lapses (no restart, no sweeper).
    const second = spawnChild({ OKE_SCENARIO: "durable", OKE_LEASE_MS: "1500" });
    const done = await second.waitFor(
      (e) => e.event === "completed" && e.id === id,
      "resumed by the second process",
    );
    expect(done.pid).toBe(second.proc.pid);
    const all = children.flatMap((c) => c.events).filter((e) => e.id === id);
    expect(all.filter((e) => e.event === "step-1")).toHaveLength(1);
    expect(all.filter((e) => e.event === "step-3")).toHaveLength(1);
    expect(all.filter((e) => e.event === "completed")).toHaveLength(1);
    await second.kill("SIGTERM");
  });

  it("a run parked by one process is resumed by another", async () => {
    const id = `park-${Date.now()}`;
    const first = spawnChild({ OKE_SCENARIO: "durable", OKE_INVOKE: id, OKE_SLEEP: "1s" });
    await first.waitFor((e) => e.event === "invoked", "parked");
    await first.kill("SIGTERM");
    const second = spawnChild({ OKE_SCENARIO: "durable", OKE_SLEEP: "1s" });
    const done = await second.waitFor((e) => e.event === "completed" && e.id === id, "resumed elsewhere");
    expect(done.pid).toBe(second.proc.pid);
    const all = children.flatMap((c) => c.events).filter((e) => e.id === id);
    expect(all.filter((e) => e.event === "step-1").map((e) => e.pid)).toEqual([first.proc.pid]);
    await second.kill("SIGTERM");
  });

  it("a handler that SIGKILLs its process: retries: 3 means exactly 4 invocations, then dead, and its key moves on", async () => {
    await fleet.query(`TRUNCATE "${schema}".results`);
    await enqueue([
      { payload: { n: 1, k: "poison" }, key: "poison" },
      { payload: { n: 2, k: "poison" }, key: "poison" },
    ]);
    const env = { OKE_SCENARIO: "suicide", OKE_LEASE_MS: "1000" };
    // Each process that takes the poison message dies in its handler; the next one reclaims it after the lease.
    let survivor: Child | undefined;
    for (let spawned = 0; survivor === undefined; spawned++) {
      if (spawned > 8) throw new Error("the poison message was still being retried after 8 processes");
      const c = spawnChild(env);
      // Resolves "died" when the child exits first (waitFor rejects then).
      const outcome = await c
        .waitFor((e) => e.event === "done" && e.n === 2, "the successor delivered", 60_000)
        .then(
          () => "done" as const,
          () => "died" as const,
        );
      if (outcome === "done") survivor = c;
    }
    const { rows } = await fleet.query<{ n: number; pid: number }>(
      `SELECT n, pid FROM "${schema}".results ORDER BY id`,
    );
    expect(rows.filter((r) => r.n === 1)).toHaveLength(4);
    expect(rows.filter((r) => r.n === 2)).toHaveLength(1);
    // Four processes died, each inside one invocation; the fifth settled the message without running it.
    expect(new Set(rows.filter((r) => r.n === 1).map((r) => r.pid)).size).toBe(4);
    const { rows: msgs } = await fleet.query<{ status: string; attempts: number; failures: unknown }>(
      `SELECT status, attempts, failures FROM "${schema}".messages WHERE key = 'poison' AND payload->>'n' = '1'`,
    );
    expect(msgs[0]).toMatchObject({ status: "dead", attempts: 5 });
    expect(msgs[0]!.failures).toEqual([expect.objectContaining({ code: "LEASE_EXPIRED", attempt: 4 })]);
    await survivor.kill("SIGTERM");
  });
});
