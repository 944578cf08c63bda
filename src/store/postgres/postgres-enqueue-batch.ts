import type { PgContext } from "./postgres-context.ts";
import { enqueue, type Outgoing } from "./postgres-enqueue.ts";

interface Waiter {
  batch: readonly Outgoing[];
  now: number;
  /** With the `now` the statement wrote (created_at; leases count from it). */
  resolve: (now: number) => void;
  reject: (e: unknown) => void;
}

interface Lane {
  waiting: Waiter[];
  inFlight: number;
}

/**
 * One statement in flight; callers arriving meanwhile share the next one. One,
 * not more: then concurrent emits of one process commit in call order (two
 * statements on two connections may commit the later-called one first).
 */
const MAX_IN_FLIGHT = 1;
const lanes = new WeakMap<PgContext, Lane>();

/**
 * Group commit for emits outside a caller's transaction: concurrent enqueue
 * calls share one multi-row INSERT (and one NOTIFY). A lone emit goes out at
 * once, so sequential latency is unchanged; 1 000 concurrent `app.emit`s went
 * from one commit each (~660/s, bench S2) to a handful of statements. Messages
 * get `seq` in call order. If a shared
 * statement fails (say one caller's duplicate id), each caller is retried alone
 * so only the culprit sees the error.
 */
export function enqueueGrouped(ctx: PgContext, batch: readonly Outgoing[], now: number): Promise<number> {
  let lane = lanes.get(ctx);
  if (!lane) {
    lane = { waiting: [], inFlight: 0 };
    lanes.set(ctx, lane);
  }
  const promise = new Promise<number>((resolve, reject) =>
    lane.waiting.push({ batch, now, resolve, reject }),
  );
  pump(ctx, lane);
  return promise;
}

function pump(ctx: PgContext, lane: Lane): void {
  while (lane.inFlight < MAX_IN_FLIGHT && lane.waiting.length > 0) {
    const batch = lane.waiting.splice(0, lane.waiting.length);
    lane.inFlight++;
    void flush(ctx, batch).finally(() => {
      lane.inFlight--;
      pump(ctx, lane);
    });
  }
}

async function flush(ctx: PgContext, batch: Waiter[]): Promise<void> {
  if (batch.length === 1) {
    const w = batch[0]!;
    await enqueue(ctx, w.batch, w.now).then(() => w.resolve(w.now), w.reject);
    return;
  }
  // One created_at for the statement: the latest caller's clock reading (they differ by microseconds).
  const now = Math.max(...batch.map((w) => w.now));
  try {
    await enqueue(
      ctx,
      batch.flatMap((w) => w.batch),
      now,
    );
    for (const w of batch) w.resolve(now);
  } catch {
    for (const w of batch) await enqueue(ctx, w.batch, w.now).then(() => w.resolve(w.now), w.reject);
  }
}
