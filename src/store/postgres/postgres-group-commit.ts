/** One group-commit lane: callers that arrive while a statement is in flight share the next one. */
import type { PgContext } from "./postgres-context.ts";
import { isPostgresOutage } from "./postgres-health.ts";

/** Requests one shared statement carries at most; the rest wait for the next one. */
export const MAX_GROUP = 1_000;

/**
 * What the shared statement decided for one caller: its value, its refusal (what `single` would
 * have thrown for it, e.g. a duplicate message id the statement skipped), or a follow-up to run alone.
 */
export type BatchOutcome<T> = { value: T } | { error: unknown } | { alone: () => Promise<T> };

export interface GroupCommit<R, T> {
  /** What the statements carry, for the log line of a fallback ("emits", "journal appends" …). */
  what: string;
  /** Statements in flight at once per store. */
  maxInFlight: number;
  /** Requests per shared statement (default MAX_GROUP). */
  maxGroup?: number;
  /** The one-caller statement: a lone request, and every request of a batch whose shared statement failed. */
  single(ctx: PgContext, req: R): Promise<T>;
  /**
   * The shared statement for two or more requests, one outcome per request in
   * order. A conflict it can answer per caller (a duplicate key it skipped) is
   * that caller's `error`; throwing sends each request through `single`, logged
   * as a failed shared statement, so a conflict it cannot fails that caller only.
   */
  batch(ctx: PgContext, reqs: R[]): Promise<BatchOutcome<T>[]>;
}

interface Waiter<R, T> {
  req: R;
  resolve: (value: T) => void;
  reject: (e: unknown) => void;
}

interface Lane<R, T> {
  waiting: Waiter<R, T>[];
  inFlight: number;
  /** A pump is scheduled (end of this tick, or after this turn's I/O callbacks). */
  scheduled: boolean;
  /** Requests the last statement carried: more than one means callers come concurrently. */
  lastGroup: number;
}

/** A lane's entry point: one request, or several queued at once (`many`) so they share a statement. */
export type Grouped<R, T> = ((ctx: PgContext, req: R) => Promise<T>) & {
  /** Queues `reqs` together before the lane sends anything: they go in one statement (up to maxGroup). */
  many(ctx: PgContext, reqs: readonly R[]): Promise<T>[];
};

/**
 * Group commit: requests that arrive while `maxInFlight` statements are in
 * flight queue up and share the next one. A lane with room does not send at
 * once either: after a lone statement it waits for the end of the tick
 * (process.nextTick), so what one burst of JavaScript asks for — say the 16
 * flows one statement's answer set going, each emitting — shares a statement;
 * after a shared one (callers come concurrently) it waits for the rest of this
 * turn of the event loop (setImmediate), so requests arriving over other sockets
 * in the same turn share it too. Neither waits for I/O of its own, so a lone
 * caller's latency is unchanged within microseconds. Measured (bench/README.md,
 * "Idempotency-Key lookup", ninth pass): POST /orders with an emit over sockets, 16
 * connections, statements per request unkeyed 0.26–0.27 -> 0.17–0.18 and keyed
 * 0.49–0.50 -> 0.25. Every caller resolves only after the statement that carried
 * it committed.
 */
export function groupCommit<R, T>(g: GroupCommit<R, T>): Grouped<R, T> {
  const lanes = new WeakMap<PgContext, Lane<R, T>>();
  const flush = async (ctx: PgContext, waiters: Waiter<R, T>[]): Promise<void> => {
    const alone = (w: Waiter<R, T>): Promise<void> => g.single(ctx, w.req).then(w.resolve, w.reject);
    if (waiters.length === 1) return alone(waiters[0]!);
    let outcomes: BatchOutcome<T>[];
    try {
      outcomes = await g.batch(
        ctx,
        waiters.map((w) => w.req),
      );
    } catch (err) {
      await fallBack(ctx, waiters, err);
      return;
    }
    // Callers the statement answered first, then the follow-ups in turn: a caller whose answer is in
    // hand does not wait behind other callers' statements (a run's start, answered, waited 6.5 s
    // behind ten acquireRun follow-ups in durable-chaos, and ran past its lease).
    for (const [i, w] of waiters.entries()) {
      const o = outcomes[i]!;
      if ("value" in o) w.resolve(o.value);
      else if ("error" in o) w.reject(o.error);
    }
    for (const [i, w] of waiters.entries()) {
      const o = outcomes[i]!;
      if ("alone" in o) await o.alone().then(w.resolve, w.reject);
    }
  };
  /**
   * The shared statement failed: each request goes alone, so one caller's
   * conflict fails that caller only. Bounded: a group holds at most
   * `maxGroup` requests, and once a lone statement finds the database
   * unavailable the rest get that error without a round trip each. Logged.
   */
  const fallBack = async (ctx: PgContext, waiters: Waiter<R, T>[], err: unknown): Promise<void> => {
    ctx.logger?.warn(
      { err, requests: waiters.length },
      `group commit: a shared statement of ${waiters.length} ${g.what} failed; sending each alone`,
    );
    let outage: unknown;
    let gaveUp = 0;
    for (const w of waiters) {
      if (outage !== undefined) {
        w.reject(outage);
        gaveUp++;
        continue;
      }
      try {
        w.resolve(await g.single(ctx, w.req));
      } catch (e) {
        if (isPostgresOutage(e)) outage = e;
        w.reject(e);
      }
    }
    if (gaveUp > 0)
      ctx.logger?.warn(
        { err: outage, requests: gaveUp },
        `group commit: the database is unavailable; ${gaveUp} ${g.what} failed without being sent again`,
      );
  };
  const pump = (ctx: PgContext, lane: Lane<R, T>): void => {
    while (lane.inFlight < g.maxInFlight && lane.waiting.length > 0) {
      const waiters = lane.waiting.splice(0, Math.min(lane.waiting.length, g.maxGroup ?? MAX_GROUP));
      lane.lastGroup = waiters.length;
      lane.inFlight++;
      void flush(ctx, waiters).finally(() => {
        lane.inFlight--;
        pump(ctx, lane);
      });
    }
  };
  const laneOf = (ctx: PgContext): Lane<R, T> => {
    let lane = lanes.get(ctx);
    if (!lane) {
      lane = { waiting: [], inFlight: 0, scheduled: false, lastGroup: 0 };
      lanes.set(ctx, lane);
    }
    return lane;
  };
  const queue = (lane: Lane<R, T>, req: R): Promise<T> =>
    new Promise<T>((resolve, reject) => lane.waiting.push({ req, resolve, reject }));
  const schedule = (ctx: PgContext, lane: Lane<R, T>): void => {
    if (lane.scheduled || lane.inFlight >= g.maxInFlight) return;
    lane.scheduled = true;
    const send = (): void => {
      lane.scheduled = false;
      pump(ctx, lane);
    };
    // Concurrent callers (the last statement was shared): wait for the rest of this turn's I/O
    // callbacks, which are more requests arriving over other sockets. Sequential ones: the tick.
    if (lane.lastGroup > 1) setImmediate(send);
    else process.nextTick(send);
  };
  // The one-request path (every append, emit and settle) allocates no array for its request.
  const one = (ctx: PgContext, req: R): Promise<T> => {
    const lane = laneOf(ctx);
    const promise = queue(lane, req);
    schedule(ctx, lane);
    return promise;
  };
  const many = (ctx: PgContext, reqs: readonly R[]): Promise<T>[] => {
    const lane = laneOf(ctx);
    const promises = reqs.map((req) => queue(lane, req));
    schedule(ctx, lane);
    return promises;
  };
  return Object.assign(one, { many });
}
