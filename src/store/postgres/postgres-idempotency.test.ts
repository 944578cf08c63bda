// Group-committed idempotency claims and completions on postgres: one winner per key, answers stored per key.
import { describe, expect, it } from "vitest";
import { T0, useSchemaStores } from "./test-support.ts";

describe("postgres idempotency group commit", () => {
  const db = useSchemaStores("idem", { poolSize: 4 });

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
});
