/** Postgres row shapes and their mapping to contract types. */
import pg from "pg";
import {
  entryName,
  type ClaimedMessage,
  type FailureReason,
  type JournalEntry,
  type MessageStatus,
  type NamedEntry,
  type RunHold,
  type RunRecord,
  type RunStatus,
  type StoredMessage,
} from "../types.ts";
import { shownHold } from "../journal-rules.ts";

/**
 * Row shapes as our queries return them and their mapping to contract types.
 * Every query runs with `pgTypes`: int8 becomes a number (epoch ms and seq fit
 * in 2^53) and a top-level JSON `null` becomes JSON_NULL, because `pg` hands
 * SQL NULL to us as `null` too — and SQL NULL is how we store `undefined`.
 */
export const JSON_NULL: unique symbol = Symbol("json null");

const parseJson = (text: string): unknown => (text === "null" ? JSON_NULL : JSON.parse(text));

/** Per-query type parsers; the global `pg.types` is left alone (the pool may be the app's). */
export const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary"): (value: string) => unknown {
    if (oid === 20) return Number; // int8
    if (oid === 114 || oid === 3802) return parseJson; // json, jsonb
    return pg.types.getTypeParser(oid, format ?? "text") as (value: string) => unknown;
  },
};
export interface MessageRow {
  id: string;
  signal: string;
  key: string | null;
  payload: unknown;
  status: string;
  attempts: number;
  failures: FailureReason[];
  locked_by: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  parent_run_id: string | null;
  seq: number;
  /** Migration 0019. */
  replays: number;
}

export interface RunRow {
  id: string;
  flow: string;
  status: string;
  input: unknown;
  output: unknown;
  error: unknown;
  parent_run_id: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  wake_at: number | null;
  /** Migration 0015. */
  recoveries: number;
  created_at: number;
  updated_at: number;
  /** Migration 0021: the last append or lease renewal (updated_at: the last status or holder change). */
  stepped_at: number | null;
  /** Migration 0030: the last release's note (journal-rules holdOf); only `SELECT *` reads it. */
  held?: unknown;
}

export interface EntryRow {
  run_id: string;
  seq: number;
  kind: string;
  name: string;
  value: unknown;
  error: unknown;
  duration: string | null;
  wake_at: number | null;
  at: number;
}

/** json/jsonb parameter: undefined becomes SQL NULL, everything else JSON text. */
export const jsonParam = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
/** json/jsonb result: SQL NULL becomes undefined, JSON null null. */
export const fromJson = (v: unknown): unknown => (v === null ? undefined : v === JSON_NULL ? null : v);

export function toStoredMessage(r: MessageRow): StoredMessage {
  return {
    id: r.id,
    signal: r.signal,
    key: r.key,
    payload: fromJson(r.payload),
    parentRunId: r.parent_run_id,
    status: r.status as MessageStatus,
    attempts: r.attempts,
    failures: r.failures,
    lockedBy: r.locked_by,
    leaseExpiresAt: r.lease_expires_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    ...(r.replays > 0 ? { replays: r.replays } : {}),
  };
}

/** The columns a claimed message is made of (a claim returns these, not every column). */
export type ClaimedRow = Pick<
  MessageRow,
  | "id"
  | "signal"
  | "key"
  | "payload"
  | "parent_run_id"
  | "attempts"
  | "created_at"
  | "locked_by"
  | "lease_expires_at"
>;

export function toClaimedMessage(r: ClaimedRow): ClaimedMessage {
  return {
    id: r.id,
    signal: r.signal,
    key: r.key,
    payload: fromJson(r.payload),
    parentRunId: r.parent_run_id,
    attempts: r.attempts,
    createdAt: r.created_at,
    lockedBy: r.locked_by ?? "",
    leaseExpiresAt: r.lease_expires_at ?? 0,
  };
}

export function toRunRecord(r: RunRow): RunRecord {
  const run: RunRecord = {
    id: r.id,
    flow: r.flow,
    status: r.status as RunStatus,
    input: fromJson(r.input),
    parentRunId: r.parent_run_id,
    leaseOwner: r.lease_owner,
    leaseExpiresAt: r.lease_expires_at,
    wakeAt: r.wake_at,
    recoveries: r.recoveries,
    createdAt: r.created_at,
    updatedAt: (r.stepped_at ?? 0) > r.updated_at ? r.stepped_at! : r.updated_at,
  };
  const output = fromJson(r.output);
  if (output !== undefined) run.output = output;
  if (r.error !== null) run.error = r.error as { code: string; message: string };
  const held = shownHold(run.status, r.lease_owner, (r.held ?? null) as RunHold | null);
  if (held !== undefined) run.held = held;
  return run;
}

/**
 * The `name` column holds every entry's replay key: a sleep's label too, so
 * sleeps journaled before the entry said `label` read back unchanged.
 */
export function toJournalEntry(r: EntryRow): JournalEntry {
  const e: JournalEntry =
    r.kind === "sleep"
      ? {
          runId: r.run_id,
          seq: r.seq,
          kind: "sleep",
          label: r.name,
          duration: r.duration ?? "",
          wakeAt: r.wake_at ?? r.at,
          at: r.at,
        }
      : { runId: r.run_id, seq: r.seq, kind: r.kind as NamedEntry["kind"], name: r.name, at: r.at };
  const value = fromJson(r.value);
  if (value !== undefined) e.value = value;
  if (r.error !== null) e.error = r.error as { code: string; message: string };
  return e;
}

/** Journal entries as one json array for json_to_recordset (one row per entry). */
export function entriesParam(runId: string, entries: readonly JournalEntry[]): string {
  return JSON.stringify(entryRecords(runId, entries));
}

/** The entries as the records insertEntriesSql reads (see entriesParam). */
export function entryRecords(runId: string, entries: readonly JournalEntry[]): object[] {
  return entries.map((e) => ({
    run_id: runId,
    seq: e.seq,
    kind: e.kind,
    name: entryName(e),
    // Wrapped so that `undefined` (absent) and `null` stay distinct through the recordset.
    value: e.value === undefined ? null : { v: e.value },
    error: e.error ?? null,
    duration: e.kind === "sleep" ? e.duration : null,
    wake_at: e.kind === "sleep" ? e.wakeAt : null,
    at: e.at,
  }));
}

/** SQL that inserts the recordset built by entriesParam($n), gated by `where`. */
export const insertEntriesSql = (s: string, param: string, where: string): string => `
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM json_to_recordset(${param}::json)
    AS e(run_id text, seq integer, kind text, name text, value json, error jsonb, duration text, wake_at bigint, at bigint)
  WHERE ${where}`;
