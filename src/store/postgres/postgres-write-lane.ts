/** One group-commit lane for emits and Idempotency-Key claims and completions: what arrives together shares one statement. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
} from "../idempotency-types.ts";
import { storeErrors } from "../index.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";
import { enqueue, enqueuedEvents, type InsertPlan, insertPlan, type Outgoing } from "./postgres-enqueue.ts";
import { mapConflict } from "./postgres-errors.ts";
import { type BatchOutcome, groupCommit } from "./postgres-group-commit.ts";
import {
  claimIdempotencyKey as claimInSteps,
  idempotencyKeyOfItem,
  idempotencyRowsSql,
  type LaneItem,
  type LaneOutcome,
  type LaneRow,
  laneOutcomes,
  laneSingle,
  laneValues,
  restore,
  sendLane,
} from "./postgres-idempotency.ts";

/** Emits outside a caller's transaction: their messages, and the clock reading of the call. */
interface EmitRequest {
  batch: readonly Outgoing[];
  now: number;
}
type WriteItem = { emit: EmitRequest } | LaneItem;
/** An emit resolves with the `now` its statement wrote; an idempotency item with its lane outcome. */
type WriteOutcome = number | LaneOutcome;

/**
 * A stored id is the documented idempotent re-emit (signals.md, "Idempotent emits"): the lone
 * statement refuses it with OKE1261, which emitOnce resolves as the first emit did. A shared
 * statement that failed on it went to the fallback, every caller alone, logged as a failure
 * (152 such warnings in 100 s of a load that re-emitted ids). So when each emit of the batch
 * carries one message, the shared INSERT skips a stored id (ON CONFLICT on the primary key only:
 * any other error still fails the statement) and names it, and that caller alone gets the
 * OKE1261 its own statement would have. Not with an emit of several messages: skipping one of
 * them would commit the others, where its own statement commits none.
 */
const skipTaken = (insert: string): string => `${insert}
  ON CONFLICT (id) DO NOTHING RETURNING id`;

/**
 * The ids of the INSERT's id array (`$p`) it did not insert, once per skipped row: EXCEPT ALL, so
 * an id twice in the batch and new is named once (its first row, in emit order, was inserted).
 */
const takenSql = (p: number): string =>
  `ARRAY(SELECT u.id FROM unnest($${p}::text[]) AS u(id) EXCEPT ALL SELECT id FROM ins) AS taken`;

/**
 * The NOTIFY of a statement that skips stored ids: sent only when it inserted a row, so a batch of
 * re-emits only (a client retrying) does not wake every listener to claim nothing.
 */
const notifyIfInserted = (p: number): string =>
  `(SELECT pg_notify($${p}::text, $${p + 1}::text) WHERE EXISTS (SELECT 1 FROM ins)) AS notified`;

/**
 * The positions in the batch of the messages skipped: per id named `n` times in `taken`, its last
 * `n` rows (of an id new to the table, the first row was the one inserted).
 */
function skippedOf(messages: readonly Outgoing[], taken: readonly string[]): Set<number> {
  const skipped = new Set<number>();
  if (taken.length === 0) return skipped;
  const left = new Map<string, number>();
  for (const id of taken) left.set(id, (left.get(id) ?? 0) + 1);
  for (let i = messages.length - 1; i >= 0; i--) {
    const { id } = messages[i]!.message;
    const n = left.get(id) ?? 0;
    if (n === 0) continue;
    skipped.add(i);
    left.set(id, n - 1);
  }
  return skipped;
}

/** Tells this process's subscribers of the announced messages the statement inserted. */
function announce(
  ctx: PgContext,
  messages: readonly Outgoing[],
  plan: InsertPlan,
  skipped: ReadonlySet<number>,
): void {
  const announced =
    skipped.size === 0
      ? plan.announced
      : messages.filter((o, i) => o.claim === undefined && !skipped.has(i)).map((o) => o.message);
  if (announced.length > 0) ctx.emit(enqueuedEvents(announced));
}

/**
 * Emits of one message each as one multi-row INSERT that skips stored ids (skipTaken), its NOTIFY
 * in the same statement. Unprepared, as enqueue's multi-row INSERT. The messages it skipped.
 */
async function sendEmits(ctx: PgContext, messages: readonly Outgoing[], now: number): Promise<Set<number>> {
  const plan = insertPlan(ctx, messages, now, 1);
  const params = [...plan.params];
  let notify = "";
  if (plan.payload !== null) {
    params.push(ctx.channel, plan.payload);
    notify = `, ${notifyIfInserted(params.length - 1)}`;
  }
  let rows: { taken: string[] }[];
  try {
    ({ rows } = await q<{ taken: string[] }>(
      ctx.pool,
      `WITH ins AS (${skipTaken(plan.insert)}) SELECT ${takenSql(1)}${notify}`,
      params,
    ));
  } catch (err) {
    throw mapConflict(err);
  }
  const skipped = skippedOf(messages, rows[0]?.taken ?? []);
  announce(ctx, messages, plan, skipped);
  return skipped;
}

/**
 * Emits and idempotency items in one statement: the idempotency rows (idempotencyRowsSql,
 * parameters $1-$9) and the messages (insertMessagesSql from $10) as two writable CTEs, one
 * commit. Synchronous: the emits' callers wait for their messages to be durable, and the claims
 * and completions riding along are then durable too. The RETURNING of the idempotency rows is
 * the result (with the NOTIFY, a left join keeps one row when no key was written). Prepared: two
 * INSERT … SELECT FROM unnest with their conflicts found by the primary keys have no plan to
 * choose (see q()); eight texts per schema (claimed messages or not, a NOTIFY or not, stored ids
 * skipped or not). Skipping (`skip`, see skipTaken), every row also carries the skipped ids, and
 * a left join keeps one row for them.
 */
const combinedSql = (s: string, insert: string, notifyAt: number | undefined, skip: boolean): string => {
  const notify = notifyAt === undefined ? undefined : `pg_notify($${notifyAt}::text, $${notifyAt + 1}::text)`;
  const from = skip
    ? `(SELECT ${takenSql(10)}${notifyAt === undefined ? "" : `, ${notifyIfInserted(notifyAt)}`}) AS t LEFT JOIN idem i ON true`
    : notify === undefined
      ? "idem i"
      : `(SELECT ${notify}) AS n LEFT JOIN idem i ON true`;
  return `
WITH idem AS (${idempotencyRowsSql(s, 1, false)}),
ins AS (${skip ? skipTaken(insert) : insert})
SELECT ${skip ? "t.taken, " : ""}i.key, i.inserted FROM ${from}`;
};
const combinedStatements = new Map<string, { text: string; name: string }>();

async function sendCombined(
  ctx: PgContext,
  messages: readonly Outgoing[],
  now: number,
  idem: readonly LaneItem[],
  skip: boolean,
): Promise<{ outcomes: (LaneOutcome | undefined)[]; skipped: Set<number> }> {
  const plan = insertPlan(ctx, messages, now, 10);
  const params: unknown[] = [...laneValues(idem), ...plan.params];
  const notifyAt = plan.payload === null ? undefined : params.length + 1;
  if (plan.payload !== null) params.push(ctx.channel, plan.payload);
  const id = `${ctx.s}\0${plan.claimed}\0${notifyAt !== undefined}\0${skip}`;
  let st = combinedStatements.get(id);
  if (st === undefined) {
    const text = combinedSql(ctx.s, plan.insert, notifyAt, skip);
    st = { text, name: preparedName("wlane", text) };
    combinedStatements.set(id, st);
  }
  let rows: (LaneRow & { taken?: string[] })[];
  try {
    ({ rows } = await q<LaneRow & { taken?: string[] }>(ctx.pool, st.text, params, st.name));
  } catch (err) {
    throw mapConflict(err);
  }
  const skipped = skippedOf(messages, rows[0]?.taken ?? []);
  announce(ctx, messages, plan, skipped);
  return { outcomes: laneOutcomes(idem, rows), skipped };
}

/**
 * The store's write lane: emits outside a transaction, idempotency claims (their first step) and
 * completions, one statement in flight per store (emits need it: two statements on two
 * connections may commit the later-called one first, and `seq` must follow call order). What
 * arrives while a statement is out goes together in the next: emits alone as one multi-row INSERT
 * (1 000 concurrent `app.emit`s went from one commit each, ~660/s in bench S2, to a handful of
 * statements), idempotency items alone as the lane statement (asynchronous commit), both as
 * combinedSql. A lone emit goes out at once as a prepared one-row INSERT, a lone claim as
 * claimOneSql, a lone completion as the lane statement with one row. Two idempotency items with
 * one key in a batch: the first goes in the statement, the second alone after it, as if they had
 * come in turn.
 *
 * Why one lane for both: a keyed request writes its claim, then its flow's emit, then its
 * completion, and an unkeyed one only the emit; with a lane each (bench/http-idempotency.ts, emit
 * flow, 16 connections) the claims and completions added 0.31 statements per keyed request and
 * broke up the emit batches (lone one-row emits and settles went up), and each statement costs
 * Node and PostgreSQL far more than a row in one: in process, with the claim and completion
 * stubbed out, a keyed request cost 1 µs of Node CPU more than an unkeyed one, with them 90 µs.
 */
const writeLane = groupCommit<WriteItem, WriteOutcome>({
  what: "emits and idempotency claims and completions",
  maxInFlight: 1,
  single: (ctx, item) =>
    "emit" in item
      ? enqueue(ctx, item.emit.batch, item.emit.now).then(() => item.emit.now)
      : laneSingle(ctx, item),
  async batch(ctx, items) {
    // One created_at for the messages: the latest caller's clock reading (they differ by
    // microseconds). A loop, not Math.max(...): a spread of a large group would overflow the stack.
    let now = -Infinity;
    const messages: Outgoing[] = [];
    const first = new Map<string, LaneItem>();
    for (const item of items) {
      if ("emit" in item) {
        if (item.emit.now > now) now = item.emit.now;
        for (const m of item.emit.batch) messages.push(m);
      } else if (!first.has(idempotencyKeyOfItem(item))) first.set(idempotencyKeyOfItem(item), item);
    }
    const idem = [...first.values()];
    // Stored ids skipped only when no emit carries several messages (see skipTaken).
    const skip = items.every((item) => !("emit" in item) || item.emit.batch.length === 1);
    let sent: (LaneOutcome | undefined)[] = [];
    let skipped = new Set<number>();
    if (idem.length === 0) {
      if (skip) skipped = await sendEmits(ctx, messages, now);
      else await enqueue(ctx, messages, now);
    } else if (messages.length === 0) sent = await sendLane(ctx, idem);
    else ({ outcomes: sent, skipped } = await sendCombined(ctx, messages, now, idem, skip));
    const outcomes = new Map(idem.map((item, i) => [item, sent[i]]));
    // Each emit's first message's position in `messages` (in skip mode its only one).
    let at = 0;
    return items.map((item): BatchOutcome<WriteOutcome> => {
      if ("emit" in item) {
        const i = at;
        at += item.emit.batch.length;
        // What its own statement would have thrown (enqueue's mapConflict): emitOnce resolves it.
        if (skipped.has(i)) return { error: storeErrors.duplicateMessage(item.emit.batch[0]!.message.id) };
        return { value: now };
      }
      // Not back through the lane: its one statement in flight is this one, until these follow-ups end.
      if (!outcomes.has(item)) return { alone: () => laneSingle(ctx, item) };
      const outcome = outcomes.get(item);
      if (outcome !== undefined) return { value: outcome };
      // A completion the statement did not store: its own follow-up, outside the shared statement.
      const req = (item as { complete: CompleteIdempotencyRequest }).complete;
      return { alone: () => restore(ctx, req) };
    });
  },
});

/**
 * How long a completion waits in this process for another write to carry it before it goes out on
 * its own. Its answer has gone out already (idempotency.ts), so this costs no request any latency; a
 * retry that reaches another instance meanwhile gets 409 (OKE1442) as it would during the
 * completion's round trip. A process crash in that time loses the completion as a lost WAL flush
 * would (the crash reasoning in postgres-idempotency.ts: the claim's takeover path). Measured
 * (bench/README.md, seventh pass): at 16 connections 43% of the idempotency statements carried
 * completions only.
 */
export const PARK_MS = 10;

interface Parked {
  req: CompleteIdempotencyRequest;
  resolve: (outcome: CompleteOutcome) => void;
  reject: (e: unknown) => void;
}
const parkedBy = new WeakMap<PgContext, { items: Parked[]; timer: ReturnType<typeof setTimeout> }>();

/**
 * Queues `ctx`'s parked completions into the lane, followed by `then` (a claim, an emit, or
 * nothing), all at once so that they share one statement. The outcomes of all, parked ones first.
 */
function unpark(ctx: PgContext, then: WriteItem[]): Promise<WriteOutcome>[] {
  const parked = parkedBy.get(ctx);
  if (parked === undefined) return then.length === 1 ? [writeLane(ctx, then[0]!)] : writeLane.many(ctx, then);
  clearTimeout(parked.timer);
  parkedBy.delete(ctx);
  const { items } = parked;
  const outcomes = writeLane.many(ctx, [...items.map((p): WriteItem => ({ complete: p.req })), ...then]);
  for (const [i, p] of items.entries())
    outcomes[i]!.then((outcome) => p.resolve(outcome as CompleteOutcome), p.reject);
  return outcomes;
}

/** Sends the completions still parked and waits for them (the store's close: none is left behind a timer). */
export async function flushParkedCompletions(ctx: PgContext): Promise<void> {
  await Promise.allSettled(unpark(ctx, []));
}

/** Group commit for emits outside a caller's transaction; resolves with the `now` the statement wrote (leases written with the messages count from it). */
export async function enqueueGrouped(
  ctx: PgContext,
  batch: readonly Outgoing[],
  now: number,
): Promise<number> {
  return (await unpark(ctx, [{ emit: { batch, now } }]).at(-1)!) as number;
}

/** A claim's first step takes the parked completions along: they share its statement. */
const claimFirstStep = async (ctx: PgContext, req: ClaimIdempotencyRequest): Promise<boolean> =>
  (await unpark(ctx, [{ claim: req }]).at(-1)!) === true;

/** claimIdempotencyKey (postgres-idempotency.ts) with its first step in the write lane. */
export const claimIdempotencyKey = (
  ctx: PgContext,
  req: ClaimIdempotencyRequest,
): Promise<IdempotencyClaim> => claimInSteps(ctx, req, claimFirstStep);

/** Parked until the next write carries it, or PARK_MS. */
export function completeIdempotencyKey(
  ctx: PgContext,
  req: CompleteIdempotencyRequest,
): Promise<CompleteOutcome> {
  return new Promise((resolve, reject) => {
    let parked = parkedBy.get(ctx);
    if (parked === undefined) {
      parked = { items: [], timer: setTimeout(() => void unpark(ctx, []), PARK_MS) };
      parkedBy.set(ctx, parked);
    }
    parked.items.push({ req, resolve, reject });
  });
}
