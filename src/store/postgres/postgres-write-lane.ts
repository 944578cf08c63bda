/** One group-commit lane for emits and Idempotency-Key claims and completions: what arrives together shares one statement. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
} from "../idempotency-types.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";
import { enqueue, enqueuedEvents, insertPlan, type Outgoing } from "./postgres-enqueue.ts";
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
 * Emits and idempotency items in one statement: the idempotency rows (idempotencyRowsSql,
 * parameters $1-$9) and the messages (insertMessagesSql from $10) as two writable CTEs, one
 * commit. Synchronous: the emits' callers wait for their messages to be durable, and the claims
 * and completions riding along are then durable too. The RETURNING of the idempotency rows is
 * the result (with the NOTIFY, a left join keeps one row when no key was written). Prepared: two
 * INSERT … SELECT FROM unnest with their conflicts found by the primary keys have no plan to
 * choose (see q()); four texts per schema (claimed messages or not, a NOTIFY or not).
 */
const combinedSql = (s: string, insert: string, notifyAt: number | undefined): string => `
WITH idem AS (${idempotencyRowsSql(s, 1, false)}),
ins AS (${insert})
SELECT i.key, i.inserted FROM ${
  notifyAt === undefined
    ? "idem i"
    : `(SELECT pg_notify($${notifyAt}::text, $${notifyAt + 1}::text)) AS n LEFT JOIN idem i ON true`
}`;
const combinedStatements = new Map<string, { text: string; name: string }>();

async function sendCombined(
  ctx: PgContext,
  messages: readonly Outgoing[],
  now: number,
  idem: readonly LaneItem[],
): Promise<(LaneOutcome | undefined)[]> {
  const plan = insertPlan(ctx, messages, now, 10);
  const params: unknown[] = [...laneValues(idem), ...plan.params];
  const notifyAt = plan.payload === null ? undefined : params.length + 1;
  if (plan.payload !== null) params.push(ctx.channel, plan.payload);
  const id = `${ctx.s}\0${plan.claimed}\0${notifyAt !== undefined}`;
  let st = combinedStatements.get(id);
  if (st === undefined) {
    const text = combinedSql(ctx.s, plan.insert, notifyAt);
    st = { text, name: preparedName("wlane", text) };
    combinedStatements.set(id, st);
  }
  let rows: LaneRow[];
  try {
    ({ rows } = await q<LaneRow>(ctx.pool, st.text, params, st.name));
  } catch (err) {
    throw mapConflict(err);
  }
  if (plan.announced.length > 0) ctx.emit(enqueuedEvents(plan.announced));
  return laneOutcomes(idem, rows);
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
    let sent: (LaneOutcome | undefined)[] = [];
    if (idem.length === 0) await enqueue(ctx, messages, now);
    else if (messages.length === 0) sent = await sendLane(ctx, idem);
    else sent = await sendCombined(ctx, messages, now, idem);
    const outcomes = new Map(idem.map((item, i) => [item, sent[i]]));
    return items.map((item): BatchOutcome<WriteOutcome> => {
      if ("emit" in item) return { value: now };
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
