/** The file store prunes delivered messages in batches, each its own commit, yielding between them: other calls run while a large prune goes on. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createFileStore } from "./file-store.ts";

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length > 0) await rm(dirs.pop()!, { recursive: true, force: true });
});

describe("file store: pruning delivered messages", () => {
  it("deletes them all in batches; a call made while it runs sees a part deleted, not all or none", async () => {
    const dir = await mkdtemp(join(tmpdir(), "oke-prune-"));
    dirs.push(dir);
    const s = createFileStore({ dir: join(dir, ".oke") });
    await s.open();
    const total = 12_000;
    await s.enqueue(
      Array.from({ length: total }, (_, i) => ({
        id: `m${i}`,
        signal: "sig.a",
        key: null,
        payload: { i },
        parentRunId: null,
      })),
      T0,
    );
    const claimed = await s.claim({ signal: "sig.a", worker: "w", max: total, now: T0, leaseMs: 30_000 });
    await s.settle(
      claimed.map((c) => ({
        id: c.id,
        worker: c.lockedBy,
        attempt: c.attempts,
        status: "delivered" as const,
      })),
      T0 + 1,
    );
    expect((await s.stats("sig.a", T0 + 2)).delivered).toBe(total);

    const pruning = s.pruneDelivered(T0 + 10);
    // Called in the same turn, after the prune's first batch: it reads between two batches.
    const during = (await s.stats("sig.a", T0 + 2)).delivered;
    expect(await pruning).toBe(total);
    expect(during).toBeGreaterThan(0);
    expect(during).toBeLessThan(total);
    expect((await s.stats("sig.a", T0 + 2)).delivered).toBe(0);
    await s.close();
  });
});
