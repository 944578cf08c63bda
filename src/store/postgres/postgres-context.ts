/** What every module of the postgres driver shares: pool, schema, notify channel, logger. */
import type pg from "pg";
import type { StoreEvent } from "../types.ts";
import { pgTypes } from "./postgres-rows.ts";
import { encodeWake, type WakePayload } from "./postgres-wake.ts";

/**
 * The database's time in epoch ms, as SQL: the fleet's clock on PostgreSQL (schedules' fleet time,
 * instances' live window), so no host's skew counts.
 */
export const DB_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/** The logger methods the driver uses (a pino logger fits). */
export interface PgLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  /** Recoveries (the database is reachable again). */
  info?(obj: object, msg?: string): void;
}

/** Anything that runs a query: the pool, or a caller's client inside BEGIN. */
export type Queryable = Pick<pg.ClientBase, "query">;

/** What every module of the driver shares. */
export interface PgContext {
  pool: pg.Pool;
  /** Quoted schema identifier, ready to prefix table names. */
  s: string;
  /** NOTIFY channel (unquoted; pg_notify takes it as text). */
  channel: string;
  /** false in poll-only mode: no NOTIFY is sent. */
  notify: boolean;
  /** This store instance's id, stamped on its own notifications. */
  origin: string;
  /** Tells this process's subscribers. */
  emit(events: StoreEvent[]): void;
  /** The store's logger (fallbacks and recoveries are logged). */
  logger?: PgLogger;
}

/**
 * The NOTIFY payload for a statement, or null when nothing is sent. With
 * `fromTx` the origin is left out so this process hears its own echo: it
 * cannot know when the caller commits.
 */
export function wakePayload(ctx: PgContext, p: Omit<WakePayload, "o">, fromTx = false): string | null {
  if (!ctx.notify) return null;
  return encodeWake(fromTx ? p : { o: ctx.origin, ...p });
}

export const unique = (xs: Iterable<string>): string[] => [...new Set(xs)];

/**
 * Runs one statement with the driver's type parsers (int8 → number, JSON null
 * kept). Statements are deliberately not prepared by name: a cached generic
 * plan outlives the table size it was made for. Measured: a settle planned
 * while the queue held 200 rows took 12 ms instead of 1.5 ms at 100 000, and
 * the bench drain fell from ~15 000/s to ~200/s until autoanalyze replanned.
 * A fresh plan per call costs ~1 ms of planning for the claim.
 *
 * `name` prepares the statement once per connection. Only for statements
 * with no plan to choose (a one-row INSERT … VALUES): their parse and plan
 * were most of an emit's round trip (see preparedName). Ignored on a pool
 * marked with withoutPreparedStatements.
 */
export async function q<R extends object>(
  db: Queryable,
  text: string,
  values: readonly unknown[],
  name?: string,
): Promise<{ rows: R[]; rowCount: number }> {
  const res = await db.query<R>({
    text,
    values: values as unknown[],
    types: pgTypes,
    ...(name === undefined || unprepared.has(db) ? {} : { name }),
  });
  return { rows: res.rows, rowCount: res.rowCount ?? 0 };
}

/**
 * A prepared statement's name for `text`, unique per statement text (so two
 * schemas, or two shapes, never share a name on one connection) and within
 * PostgreSQL's 63-byte identifier limit.
 */
export function preparedName(prefix: string, text: string): string {
  const key = `${prefix}\0${text}`;
  let name = names.get(key);
  if (name !== undefined) return name;
  // FNV-1a over the text: a name, not a security boundary.
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  name = `oke_${prefix}_${h.toString(36)}_${text.length.toString(36)}`;
  names.set(key, name);
  return name;
}

/**
 * Pools whose statements are never prepared by name: a store in poll-only mode
 * (`notify: false`) is the documented setting behind PgBouncer in transaction
 * pooling mode, where the next statement may run on another server connection
 * that never saw the PREPARE ("prepared statement … does not exist"). There
 * they go unprepared, as every statement did before.
 */
const unprepared = new WeakSet<object>();

/** Sends every statement on `pool` unprepared (q() drops its `name`). */
export function withoutPreparedStatements(pool: object): void {
  unprepared.add(pool);
}

/** preparedName's results: a handful of statement texts per schema. */
const names = new Map<string, string>();
