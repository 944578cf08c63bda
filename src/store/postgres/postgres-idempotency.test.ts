// Group-committed idempotency claims and completions on postgres: one winner per key, answers stored per key.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openStore, PG_URL, T0, useSchemaStores } from "./test-support.ts";

describe("postgres idempotency group commit", () => {
  const db = useSchemaStores("idem", { poolSize: 4 });

  it("a completion waits for the next claim and shares its statement; with no claim it goes out alone after PARK_MS, and close() sends what is still parked", async () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    const sent: string[] = [];
    const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
    (pool as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = (...a: unknown[]) => {
      const text = typeof a[0] === "string" ? a[0] : (a[0] as { text: string }).text;
      if (text.includes("idempotency_keys")) sent.push(text);
      return query(...a);
    };
    const store = await openStore(db.schema, { pool });
    const W = 3_600_000;
    const T = T0 + 100 * W; // clear of the other cases' keys
    const claim = (key: string) =>
      store.claimIdempotencyKey({
        key,
        fingerprint: "fp",
        runId: `run-${key}`,
        now: T,
        lockMs: 60_000,
        windowMs: W,
      });
    const complete = (key: string) =>
      store.completeIdempotencyKey({
        key,
        fingerprint: "fp",
        response: { status: 200, body: `"${key}"` },
        now: T + 1,
        runId: `run-${key}`,
        windowMs: W,
      });
    try {
      expect(await claim("park-a")).toEqual({ kind: "claimed" });
      sent.length = 0;
      const completed = complete("park-a");
      await new Promise((resolve) => setImmediate(resolve));
      expect(sent).toHaveLength(0); // parked
      expect(await claim("park-b")).toEqual({ kind: "claimed" });
      expect(await completed).toBe("completed");
      expect(sent).toHaveLength(1); // the claim carried the completion
      expect(await store.getIdempotencyKey("park-a")).toMatchObject({
        status: "done",
        response: { status: 200 },
      });

      sent.length = 0;
      expect(await complete("park-b")).toBe("completed");
      expect(sent).toHaveLength(1);

      expect(await claim("park-c")).toEqual({ kind: "claimed" });
      const atClose = complete("park-c");
      await store.close();
      expect(await atClose).toBe("completed");
      expect(await db.store.getIdempotencyKey("park-c")).toMatchObject({ status: "done" });
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it("60 concurrent claims over 20 keys (3 each): one claimed per key, the others see it running; concurrent completions store each key's answer", async () => {
    const { store } = db;
    const claim = (key: string, i: number, now = T0) =>
      store.claimIdempotencyKey({
        key,
        fingerprint: `fp-${key}`,
        runId: `run-${key}-${i}`,
        now,
        lockMs: 60_000,
        windowMs: 3_600_000,
      });
    const keys = Array.from({ length: 20 }, (_, k) => `key-${k}`);
    const results = await Promise.all(
      keys.flatMap((key) => [0, 1, 2].map(async (i) => ({ key, i, r: await claim(key, i) }))),
    );
    for (const key of keys) {
      const mine = results.filter((x) => x.key === key);
      expect(mine.filter((x) => x.r.kind === "claimed")).toHaveLength(1);
      for (const x of mine.filter((y) => y.r.kind !== "claimed"))
        expect(x.r).toMatchObject({
          kind: "existing",
          record: { status: "running", fingerprint: `fp-${key}` },
        });
    }
    await Promise.all(
      keys.map((key, k) =>
        store.completeIdempotencyKey({
          key,
          fingerprint: `fp-${key}`,
          response: { status: 200 + (k % 3), body: `{"k":${k}}` },
          now: T0 + 1,
          runId: `run-${key}`,
          windowMs: 3_600_000,
        }),
      ),
    );
    for (const [k, key] of keys.entries())
      expect(await store.getIdempotencyKey(key)).toMatchObject({
        status: "done",
        response: { status: 200 + (k % 3), body: `{"k":${k}}` },
      });
    // After the window every key can be claimed afresh, again concurrently.
    const later = await Promise.all(keys.map((key) => claim(key, 9, T0 + 3_600_001)));
    expect(later.every((r) => r.kind === "claimed")).toBe(true);
  });

  it("claims and completions sent together share statements and each gets its own outcome: claimed, completed, restored (missing or expired key), superseded, a second item of one key after the first", async () => {
    const { store } = db;
    const W = 3_600_000;
    const T1 = T0 + 10 * W; // clear of the first test's keys
    const claim = (key: string, now = T1, fingerprint = `fp-${key}`) =>
      store.claimIdempotencyKey({ key, fingerprint, runId: `run-${key}`, now, lockMs: 60_000, windowMs: W });
    const complete = (key: string, now: number, fingerprint = `fp-${key}`) =>
      store.completeIdempotencyKey({
        key,
        fingerprint,
        response: { status: 201, body: `{"${key}":1}` },
        now,
        runId: `run-${key}`,
        windowMs: W,
      });
    const done = Array.from({ length: 12 }, (_, i) => `mix-done-${i}`);
    const expired = Array.from({ length: 4 }, (_, i) => `mix-expired-${i}`);
    const other = Array.from({ length: 4 }, (_, i) => `mix-other-${i}`);
    for (const key of done) expect((await claim(key)).kind).toBe("claimed");
    for (const key of expired) expect((await claim(key, T1 - 2 * W)).kind).toBe("claimed");
    for (const key of other) expect((await claim(key, T1, "someone-else")).kind).toBe("claimed");
    const fresh = Array.from({ length: 12 }, (_, i) => `mix-fresh-${i}`);
    const missing = Array.from({ length: 4 }, (_, i) => `mix-missing-${i}`);
    // All at once, claims and completions interleaved, so the lane's statements carry both.
    const at = T1 + 5;
    const results = await Promise.all([
      ...fresh.flatMap((key, i) => [claim(key, at), complete(done[i]!, at)]),
      ...expired.map((key) => complete(key, at)),
      ...other.map((key) => complete(key, at)),
      ...missing.map((key) => complete(key, at)),
      // One key twice: the same completion again, queued behind the first (it goes alone after it).
      complete("mix-done-0", at),
    ]);
    const fromFresh = results.slice(0, 24);
    for (let i = 0; i < 12; i++) {
      expect(fromFresh[2 * i]).toEqual({ kind: "claimed" });
      expect(fromFresh[2 * i + 1]).toBe("completed");
    }
    expect(results.slice(24, 28)).toEqual(["restored", "restored", "restored", "restored"]);
    expect(results.slice(28, 32)).toEqual(["superseded", "superseded", "superseded", "superseded"]);
    expect(results.slice(32, 36)).toEqual(["restored", "restored", "restored", "restored"]);
    // The repeat found its key already done by the first completion.
    expect(results[36]).toBe("superseded");
    for (const key of [...done, ...expired, ...missing])
      expect(await store.getIdempotencyKey(key)).toMatchObject({
        status: "done",
        response: { status: 201, body: `{"${key}":1}` },
      });
    expect(await store.getIdempotencyKey("mix-done-3")).toMatchObject({ createdAt: T1, expiresAt: T1 + W });
    expect(await store.getIdempotencyKey("mix-expired-1")).toMatchObject({
      createdAt: at,
      expiresAt: at + W,
      lockedUntil: at,
    });
    expect(await store.getIdempotencyKey("mix-missing-1")).toMatchObject({
      createdAt: at,
      expiresAt: at + W,
      lockedUntil: at,
      runId: "run-mix-missing-1",
    });
    for (const key of other)
      expect(await store.getIdempotencyKey(key)).toMatchObject({
        status: "running",
        fingerprint: "someone-else",
      });
    for (const key of fresh)
      expect(await store.getIdempotencyKey(key)).toMatchObject({ status: "running", createdAt: at });
  });

  it("keys, fingerprints, run ids and bodies with quotes, backslashes, commas, braces, NULL and empty text go through a shared lane statement unchanged", async () => {
    const { store } = db;
    const T = T0 + 300 * 3_600_000; // clear of the other cases' keys
    const odd = ['q"uote', "back\\slash", "a,b", "{br}aces", "NULL", '\\"mix\\"', "plain"];
    const bodies: Array<string | null> = ['{"a":"x\\"y"}', "", "NULL", null, '"\\\\"', "{}", "[1,2]"];
    const claims = await Promise.all(
      odd.map((key) =>
        store.claimIdempotencyKey({
          key,
          fingerprint: `fp ${key}`,
          runId: `run ${key}`,
          now: T,
          lockMs: 60_000,
          windowMs: 3_600_000,
        }),
      ),
    );
    expect(claims.map((c) => c.kind)).toEqual(odd.map(() => "claimed"));
    const outcomes = await Promise.all(
      odd.map((key, i) =>
        store.completeIdempotencyKey({
          key,
          fingerprint: `fp ${key}`,
          response: { status: 200 + i, body: bodies[i]! },
          now: T + 1,
          runId: `run ${key}`,
          windowMs: 3_600_000,
        }),
      ),
    );
    expect(outcomes).toEqual(odd.map(() => "completed"));
    for (const [i, key] of odd.entries())
      expect(await store.getIdempotencyKey(key)).toMatchObject({
        key,
        fingerprint: `fp ${key}`,
        runId: `run ${key}`,
        status: "done",
        response: { status: 200 + i, body: bodies[i] },
      });
  });
});
