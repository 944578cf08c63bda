// Migration 0025 on postgres: the completions of a lane statement's claims rewrite their rows in place (HOT), adding no index entries.
import { describe, expect, it } from "vitest";
import { storeOnOneConnection } from "./test-support.ts";

describe("postgres: idempotency completions are HOT updates", () => {
  it("200 keys claimed together and then completed: every completion is a HOT update, and each key answers its response", async () => {
    const { store, pool, schema } = await storeOnOneConnection("idhot");
    const now = 1_000_000;
    const W = 3_600_000;
    // UUID-long keys and a POST /orders-sized answer: the rows of a real keyed request.
    const keys = Array.from(
      { length: 200 },
      (_, i) => `4f1c2b7e-9a3d-4e5f-8b6a-${String(i).padStart(12, "0")}`,
    );
    const runId = (key: string) => `run-01JEXAMPLE0000000000${key.slice(-6)}`;
    const body = (key: string) =>
      JSON.stringify({ orderId: `01JEXAMPLEORDER${key.slice(-8)}`, sku: "sku-1" });
    const claims = await Promise.all(
      keys.map((key) =>
        store.claimIdempotencyKey({
          key,
          fingerprint: "x".repeat(43),
          runId: runId(key),
          now,
          lockMs: 30_000,
          windowMs: W,
        }),
      ),
    );
    expect(claims.every((c) => c.kind === "claimed")).toBe(true);
    const outcomes = await Promise.all(
      keys.map((key) =>
        store.completeIdempotencyKey({
          key,
          fingerprint: "x".repeat(43),
          response: { status: 200, body: body(key) },
          now: now + 5,
          runId: runId(key),
          windowMs: W,
        }),
      ),
    );
    expect(outcomes.every((o) => o === "completed")).toBe(true);
    await pool.query("SELECT pg_stat_force_next_flush()");
    const { rows } = await pool.query<{ all: string; hot: string }>(
      `SELECT n_tup_upd AS all, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relid = $1::regclass`,
      [`"${schema}".idempotency_keys`],
    );
    expect({ all: Number(rows[0]!.all), hot: Number(rows[0]!.hot) }).toEqual({ all: 200, hot: 200 });
    const record = await store.getIdempotencyKey(keys[7]!);
    expect(record).toMatchObject({
      status: "done",
      response: { status: 200, body: body(keys[7]!) },
      runId: runId(keys[7]!),
    });
  });
});
