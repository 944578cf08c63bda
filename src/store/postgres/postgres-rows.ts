import type { ClaimedMessage, FailureReason, JournalEntry, JournalKind, MessageStatus, RunRecord, RunStatus, StoredMessage } from "../types.ts";

/**
 * Row shapes as `pg` returns them (int8 arrives as a string) and their
 * mapping to contract types. jsonb SQL NULL stands for `undefined`.
 */
export interface MessageRow {
  id: string;
  signal: string;
  key: string | null;
  payload: unknown;
  status: string;
  attempts: number;
  failures: FailureReason[];
  locked_by: string | null;
  lease_expires_at: string | null;
  created_at: string;
  updated_at: string;
  parent_run_id: string | null;
  seq: string;
}

export interface RunRow {
  id: string;
  flow: string;
  status: string;
  input: unknown;
  output: unknown;
  error: { code: string; message: string } | null;
  parent_run_id: string | null;
  lease_owner: string | null;
  lease_expires_at: string | null;
  wake_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface EntryRow {
  run_id: string;
  seq: number;
  kind: string;
  name: string;
  value: unknown;
  error: { code: string; message: string } | null;
  duration: string | null;
  wake_at: string | null;
  at: string;
}

const num = (v: string | number): number => Number(v);
const numOrNull = (v: string | number | null): number | null => (v === null ? null : Number(v));
/** jsonb parameter: undefined becomes SQL NULL, everything else JSON text. */
export const jsonParam = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
/** jsonb result: SQL NULL becomes undefined. */
const fromJson = (v: unknown): unknown => (v === null ? undefined : v);

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
    leaseExpiresAt: numOrNull(r.lease_expires_at),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
}

export function toClaimedMessage(r: MessageRow): ClaimedMessage {
  return {
    id: r.id,
    signal: r.signal,
    key: r.key,
    payload: fromJson(r.payload),
    parentRunId: r.parent_run_id,
    attempts: r.attempts,
    createdAt: num(r.created_at),
    lockedBy: r.locked_by ?? "",
    leaseExpiresAt: num(r.lease_expires_at ?? 0),
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
    leaseExpiresAt: numOrNull(r.lease_expires_at),
    wakeAt: numOrNull(r.wake_at),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
  if (r.output !== null) run.output = r.output;
  if (r.error !== null) run.error = r.error;
  return run;
}

export function toJournalEntry(r: EntryRow): JournalEntry {
  const e: JournalEntry = { runId: r.run_id, seq: r.seq, kind: r.kind as JournalKind, name: r.name, at: num(r.at) };
  if (r.value !== null) e.value = r.value;
  if (r.error !== null) e.error = r.error;
  if (r.duration !== null) e.duration = r.duration;
  if (r.wake_at !== null) e.wakeAt = num(r.wake_at);
  return e;
}

/** Journal entries as one jsonb array for jsonb_to_recordset (one row per entry). */
export function entriesParam(entries: readonly JournalEntry[]): string {
  return JSON.stringify(
    entries.map((e) => ({
      run_id: e.runId,
      seq: e.seq,
      kind: e.kind,
      name: e.name,
      // Wrapped so that `undefined` (absent) and `null` stay distinct through the recordset.
      value: e.value === undefined ? null : { v: e.value },
      error: e.error ?? null,
      duration: e.duration ?? null,
      wake_at: e.wakeAt ?? null,
      at: e.at,
    })),
  );
}

/** SQL that inserts the recordset built by entriesParam($n). */
export const insertEntriesSql = (s: string, param: string): string => `
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM jsonb_to_recordset(${param}::jsonb)
    AS e(run_id text, seq integer, kind text, name text, value jsonb, error jsonb, duration text, wake_at bigint, at bigint)`;
