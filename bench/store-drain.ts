/**
 * The store-level drain loop shared by file-drain.ts and postgres-drain.ts: a
 * worker pool of `concurrency` slots with no-op handlers that claims up to the
 * free slots and settles finished work in batches, timing claims and settles.
 */
import type { Settlement, Store } from "../src/store/types.ts";

const LEASE = 30_000;

/** A worker pool of `concurrency` slots: claim up to the free slots, settle finished work in batches. */
export async function drain(
  store: Store,
  total: number,
  concurrency: number,
  now: number,
): Promise<{ claims: number; settles: number; claimMs: number; settleMs: number }> {
  let free = concurrency;
  let done = 0;
  let claims = 0;
  let settles = 0;
  let claimMs = 0;
  let settleMs = 0;
  const finished: Settlement[] = [];
  let settling: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const poke = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const flush = (): void => {
    if (settling !== undefined || finished.length === 0) return;
    const batch = finished.splice(0);
    settles++;
    const t0 = performance.now();
    settling = store.settle(batch, now).then((r) => {
      settleMs += performance.now() - t0;
      done += r.applied.length;
      settling = undefined;
      flush();
      poke();
    });
  };
  while (done < total) {
    if (free === 0 || (await claimInto())) {
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  await settling;
  return { claims, settles, claimMs, settleMs };

  /** Returns true when there is nothing to claim right now (wait for a settle). */
  async function claimInto(): Promise<boolean> {
    const t0 = performance.now();
    const got = await store.claim({ signal: "bench", worker: "bench", max: free, now, leaseMs: LEASE });
    claimMs += performance.now() - t0;
    claims++;
    if (got.length === 0) return settling !== undefined;
    free -= got.length;
    for (const c of got) {
      // The no-op handler: finishes on a microtask, frees its slot.
      queueMicrotask(() => {
        finished.push({ id: c.id, worker: c.lockedBy, attempt: c.attempts, status: "delivered" });
        free++;
        flush();
      });
    }
    await Promise.resolve();
    return false;
  }
}
