// Idempotency-Key records across a PostgreSQL crash: the claim's and the answer's commits are not waited for, yet nothing that came after them survives without them.
import { describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { Store } from "../../src/store/types.ts";
import { usePrivateCluster } from "./private-cluster.ts";

// The claim and the stored answer commit with synchronous_commit = off (postgres-idempotency.ts). The WAL writer is
// slowed to its maximum (10 s) so a claim's commit record stays in the WAL buffers unless a later
// synchronous commit writes it out; an immediate stop then loses exactly what was not written.

const T0 = 1_700_000_000_000;
const LOCK = 30_000;
const cluster = usePrivateCluster(["wal_writer_delay=10000", "synchronous_commit=on"]);
const schema = "idem_crash";
const open = async (): Promise<Store> => {
  const store = createPostgresStore({ connectionString: cluster.url, schema });
  await store.open();
  return store;
};
const claim = (store: Store, key: string, runId: string, now = T0) =>
  store.claimIdempotencyKey({ key, fingerprint: `fp-${key}`, runId, now, lockMs: LOCK, windowMs: 3_600_000 });

describe("Idempotency-Key records across a PostgreSQL crash", () => {
  it("a claim followed by the flow's own write (its run, an emit) survives with it; an answer followed by a synchronous write survives; a lone claim or answer is lost at most", async () => {
    let store = await open();
    // A durable flow's request: the claim, then its run and an emit — synchronous commits after it.
    expect(await claim(store, "with-run", "run-1")).toEqual({ kind: "claimed" });
    await store.startRun({
      id: "run-1",
      flow: "orders.create",
      input: { sku: "a" },
      parentRunId: null,
      owner: "crash-test/1",
      now: T0,
      leaseMs: LOCK,
    });
    await store.enqueue(
      [{ id: "msg-1", signal: "orders.created", key: null, payload: {}, parentRunId: "run-1" }],
      T0,
    );
    // A finished request whose stored answer (committed asynchronously too) was followed by
    // another request's synchronous write: written out with it.
    const complete = (key: string, runId: string) =>
      store.completeIdempotencyKey({
        key,
        fingerprint: `fp-${key}`,
        response: { status: 200, body: `{"data":{"orderId":"${runId}"}}` },
        now: T0 + 1,
        runId,
        windowMs: 3_600_000,
      });
    expect(await claim(store, "answered", "run-2")).toEqual({ kind: "claimed" });
    expect(await complete("answered", "run-2")).toBe("completed");
    await store.enqueue(
      [{ id: "msg-2", signal: "orders.created", key: null, payload: {}, parentRunId: "run-4" }],
      T0 + 2,
    );
    // A finished request with nothing synchronous after it: its answer may be lost.
    expect(await claim(store, "answered-late", "run-5")).toEqual({ kind: "claimed" });
    expect(await complete("answered-late", "run-5")).toBe("completed");
    // A request that had done nothing durable yet: its claim is the last thing committed.
    expect(await claim(store, "lone", "run-3")).toEqual({ kind: "claimed" });

    await cluster.crash();
    await store.close().catch(() => undefined);
    await cluster.start();
    store = await open();
    try {
      // The run and the emit came after the claim in the WAL: they cannot outlive it.
      expect(await store.getRun("run-1")).toMatchObject({ id: "run-1" });
      expect(await store.getMessage("msg-1")).toMatchObject({ id: "msg-1" });
      expect(await store.getIdempotencyKey("with-run")).toMatchObject({ status: "running", runId: "run-1" });
      // A retry after the lock lapsed continues that run (same run id), so the emit is not repeated.
      expect(await claim(store, "with-run", "run-9", T0 + LOCK)).toMatchObject({
        kind: "takenOver",
        record: { runId: "run-1" },
      });
      expect(await store.getIdempotencyKey("answered")).toMatchObject({
        status: "done",
        response: { status: 200, body: '{"data":{"orderId":"run-2"}}' },
      });
      // The late answer survived, or the retry takes the same run over (its emits are refused as
      // duplicates, see fx.ts nextId) and stores a recomputed answer, or — nothing of it survived —
      // runs afresh. Never another request's answer.
      const late = await store.getIdempotencyKey("answered-late");
      if (late?.status === "done")
        expect(late.response).toEqual({ status: 200, body: '{"data":{"orderId":"run-5"}}' });
      else {
        const again = await claim(store, "answered-late", "run-7", T0 + LOCK);
        if (late === undefined) expect(again).toEqual({ kind: "claimed" });
        else expect(again).toMatchObject({ kind: "takenOver", record: { runId: "run-5" } });
      }
      // Nothing observable came after this claim, so losing it is allowed: the retry then runs the
      // request (claimed); if it survived, the retry takes it over once its lock lapsed. Never an answer.
      const retry = await claim(store, "lone", "run-8", T0 + LOCK);
      expect(["claimed", "takenOver"]).toContain(retry.kind);
    } finally {
      await store.close();
    }
  }, 60_000);
});
