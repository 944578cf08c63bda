import type pg from "pg";
import type { StoreEvent } from "../types.ts";
import { pgTypes } from "./postgres-rows.ts";
import { encodeWake, type WakePayload } from "./postgres-wake.ts";

/** The logger methods the driver uses (a pino logger fits). */
export interface PgLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Anything that runs a query: the pool, or a caller's client inside BEGIN. */
export type Queryable = Pick<pg.ClientBase, "query">;

/** What every module of the driver shares. */
export interface PgContext {
  pool: pg.Pool;
  /** Unquoted schema name (≤ 48 chars): suffix of prepared-statement names, which must fit 63. */
  schema: string;
  /** Quoted schema identifier, ready to prefix table names. */
  s: string;
  /** NOTIFY channel (unquoted; pg_notify takes it as text). */
  channel: string;
  /**
   * false in poll-only mode: no NOTIFY is sent, and no named prepared
   * statements either (PgBouncer transaction pooling may run them on another
   * server connection).
   */
  notify: boolean;
  /** This store instance's id, stamped on its own notifications. */
  origin: string;
  /** Tells this process's subscribers. */
  emit(events: StoreEvent[]): void;
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
 * kept). Hot statements pass a `name`: each connection then parses and plans
 * them once (measured: ~1 ms of planning saved per claim, and the generic plan
 * is the same index-driven plan).
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
    ...(name === undefined ? {} : { name }),
  });
  return { rows: res.rows, rowCount: res.rowCount ?? 0 };
}

/** Prepared-statement name for a hot statement, or undefined in poll-only (PgBouncer) mode. */
export const stmt = (ctx: PgContext, base: string): string | undefined =>
  ctx.notify ? `oke_${base}_${ctx.schema}` : undefined;
