/** Group commit for emits: concurrent enqueues share one INSERT. */
import type { PgContext } from "./postgres-context.ts";
import { enqueue, type Outgoing } from "./postgres-enqueue.ts";
import { groupCommit } from "./postgres-group-commit.ts";

interface Request {
  batch: readonly Outgoing[];
  now: number;
}

/**
 * Group commit for emits outside a caller's transaction: concurrent enqueue
 * calls share one multi-row INSERT (and one NOTIFY). 1 000 concurrent
 * `app.emit`s went from one commit each (~660/s, bench S2) to a handful of
 * statements. Messages get `seq` in call order: one statement in flight, not
 * more, because two statements on two connections may commit the later-called
 * one first. Resolves with the `now` the statement wrote (created_at; leases
 * written with the messages count from it).
 */
const grouped = groupCommit<Request, number>({
  what: "emits",
  maxInFlight: 1,
  single: (ctx, r) => enqueue(ctx, r.batch, r.now).then(() => r.now),
  async batch(ctx, reqs) {
    // One created_at for the statement: the latest caller's clock reading (they differ by microseconds).
    // A loop, not Math.max(...): a spread of a large group would overflow the stack.
    let now = -Infinity;
    const messages: Outgoing[] = [];
    for (const r of reqs) {
      if (r.now > now) now = r.now;
      for (const m of r.batch) messages.push(m);
    }
    await enqueue(ctx, messages, now);
    return reqs.map(() => ({ value: now }));
  },
});

export function enqueueGrouped(ctx: PgContext, batch: readonly Outgoing[], now: number): Promise<number> {
  return grouped(ctx, { batch, now });
}
