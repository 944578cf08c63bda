// The postgres claim under concurrency: exclusivity, the per-key guard, hot keys, pruning.
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { ClaimedMessage, NewMessage, Store } from "../types.ts";
import { claimCall, claimSql } from "./postgres-claim.ts";
import { keyedDrain, newMessage, PG_URL, T0, useSchemaStores } from "./test-support.ts";

const LEASE = 60_000;
const yieldTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const msg = (id: string, key: string | null, signal = "sig.c"): NewMessage => newMessage(id, key, signal);

describe("postgres claim under concurrency", () => {
  // Four stores = four pools = four independent sets of connections, as four processes would have.
  const { schema, stores } = useSchemaStores("claim", { count: 4, poolSize: 3 });

  it("4 stores draining 2 000 messages over 50 keys: each claimed once, never two of one key inflight, FIFO per key", async () => {
    const N = 2_000;
    // Keys in a fixed pseudo-random order (not round-robin, which would keep
    // same-key messages 50 apart and hide a broken head-of-key check).
    let seed = 42;
    const nextKey = (): string =>
      `k${((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) >>> 16) % 50}`;
    const all = Array.from({ length: N }, (_, i) => msg(`m-${String(i).padStart(4, "0")}`, nextKey()));
    expect(new Set(all.map((m) => m.key)).size).toBe(50);
    for (let i = 0; i < N; i += 500) await stores[0]!.enqueue(all.slice(i, i + 500), T0);

    const drain = keyedDrain(all);
    let delivered = 0;
    let now = T0;

    const worker = async (store: Store, name: string): Promise<void> => {
      while (delivered < N) {
        const got: ClaimedMessage[] = await store.claim({
          signal: "sig.c",
          worker: name,
          max: 5,
          now: ++now,
          leaseMs: LEASE,
        });
        if (got.length === 0) {
          await yieldTurn();
          continue;
        }
        drain.take(got);
        await yieldTurn(); // "work": let the other workers run while we hold these keys
        drain.release(got); // before settling (see keyedDrain)
        const res = await store.settle(
          got.map((c) => ({ id: c.id, worker: c.lockedBy, attempt: c.attempts, status: "delivered" })),
          now,
        );
        expect(res.applied).toHaveLength(got.length);
        delivered += got.length;
      }
    };
    await Promise.all(stores.flatMap((s, i) => [worker(s, `s${i}a`), worker(s, `s${i}b`)]));

    await drain.expectDrainedOnce(stores[0]!, "sig.c", now);
  });

  /*
   * The race the per-key guard exists for, made deterministic: an emit that
   * commits late with a smaller seq becomes the head for a claimer that starts
   * after it, while an earlier claimer — not yet committed — took the other
   * row of the key. Without the guard both go inflight.
   */
  const lateHeadRace = async (
    guarded: boolean,
    viaFunction = false,
  ): Promise<{ second: string[]; inflight: number }> => {
    const signal = viaFunction ? "sig.race.function" : guarded ? "sig.race.guarded" : "sig.race.bare";
    const store = stores[0]!;
    const s = `"${schema}"`;
    // viaFunction: the call the store sends (migration 0023's claim_messages, claimSql inside it).
    const sql = viaFunction
      ? claimCall(s).text
      : guarded
        ? claimSql(s)
        : // Every guard call (keyed, reclaim, loose) answers "all free".
          claimSql(s).replace(/\S+\.claim_keys_free\(\$1, (ARRAY\(SELECT key FROM [^)]+\)), \$2\)/g, "$1");
    const producer = new pg.Client({ connectionString: PG_URL });
    const first = new pg.Client({ connectionString: PG_URL });
    const second = new pg.Client({ connectionString: PG_URL });
    await Promise.all([producer.connect(), first.connect(), second.connect()]);
    try {
      await producer.query("BEGIN");
      await store.enqueue([msg(`${signal}-early`, "k", signal)], T0, { tx: producer }); // smaller seq, not committed
      await store.enqueue([msg(`${signal}-late`, "k", signal)], T0);
      await first.query("BEGIN");
      const a = await first.query<{ id: string }>(sql, [signal, T0, 10, "first", LEASE]);
      expect(a.rows.map((r) => r.id)).toEqual([`${signal}-late`]); // the only row it can see
      await producer.query("COMMIT"); // the early row appears, older than the one being claimed
      const b = await second.query<{ id: string }>(sql, [signal, T0, 10, "second", LEASE]);
      await first.query("COMMIT");
      const inflight = (await store.stats(signal, T0)).inflight;
      return { second: b.rows.map((r) => r.id), inflight };
    } finally {
      await Promise.all([producer.end(), first.end(), second.end()]);
    }
  };

  it("without the guard, a late-committing emit lets a second claimer take another message of a held key", async () => {
    const { second, inflight } = await lateHeadRace(false);
    expect(second).toEqual(["sig.race.bare-early"]);
    expect(inflight).toBe(2);
  });

  it("with the guard, the second claimer skips the key; after the first commits the key stays blocked", async () => {
    const { second, inflight } = await lateHeadRace(true);
    expect(second).toEqual([]);
    expect(inflight).toBe(1);
    const again = await stores[1]!.claim({
      signal: "sig.race.guarded",
      worker: "third",
      max: 10,
      now: T0 + 1,
      leaseMs: LEASE,
    });
    expect(again).toEqual([]);
  });
  it("with the guard inside claim_messages (the call the store sends), the second claimer skips the key too", async () => {
    const { second, inflight } = await lateHeadRace(true, true);
    expect(second).toEqual([]);
    expect(inflight).toBe(1);
  });

  it("claim_messages runs claimSql word for word (a change to claimSql needs a migration replacing it)", async () => {
    const s = `"${schema}"`;
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    const { rows } = await c
      .query<{ src: string }>(
        "SELECT prosrc AS src FROM pg_proc WHERE proname = 'claim_messages' AND pronamespace = $1::regnamespace",
        [s],
      )
      .finally(() => c.end());
    expect(rows).toHaveLength(1);
    expect(rows[0]!.src).toContain(`RETURN QUERY${claimSql(s)};`);
  });

  it("a hot key's backlog longer than the walk does not hide other keys' heads or unkeyed work behind it", async () => {
    const store = stores[0]!;
    const signal = "sig.hot";
    const hot = Array.from({ length: 400 }, (_, i) =>
      msg(`hot-${String(i).padStart(3, "0")}`, "hot", signal),
    );
    await store.enqueue(hot, T0);
    await store.enqueue(
      [msg("b-1", "b", signal), msg("c-1", "c", signal), msg("u-1", null, signal), msg("b-2", "b", signal)],
      T0,
    );
    const claim = (worker: string, now = T0) => store.claim({ signal, worker, max: 10, now, leaseMs: LEASE });
    const first = await claim("w1");
    expect(first.map((c) => c.id)).toEqual(["hot-000", "b-1", "c-1", "u-1"]);
    expect(await claim("w2")).toEqual([]);
    const res = await store.settle(
      first
        .filter((c) => c.key === "hot" || c.key === "b")
        .map((c) => ({ id: c.id, worker: c.lockedBy, attempt: c.attempts, status: "delivered" as const })),
      T0,
    );
    expect(res.applied).toEqual(["hot-000", "b-1"]);
    expect((await claim("w3")).map((c) => c.id)).toEqual(["hot-001", "b-2"]);
  });

  it("pruneDelivered removes delivered rows in batches and keeps dead ones", async () => {
    const store = stores[0]!;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(
        `INSERT INTO "${schema}".messages (id, signal, key, payload, status, created_at, updated_at)
         SELECT 'old-' || g, 'sig.prune', NULL, '{}', CASE WHEN g % 1000 = 0 THEN 'dead' ELSE 'delivered' END, $1, $1
         FROM generate_series(1, 25000) g`,
        [T0 - 1_000], // older than every other row of this file's schema
      );
      await admin.query(
        `INSERT INTO "${schema}".messages (id, signal, key, payload, status, created_at, updated_at)
         VALUES ('recent', 'sig.prune', NULL, '{}', 'delivered', $1, $1)`,
        [T0 - 500],
      );
    } finally {
      await admin.end();
    }
    expect(await store.pruneDelivered(T0 - 500)).toBe(24_975); // strictly before the cut-off
    expect(await store.stats("sig.prune", T0)).toMatchObject({ delivered: 1, dead: 25 });
  });
});
