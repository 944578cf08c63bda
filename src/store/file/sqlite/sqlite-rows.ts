/** The file engine's rows: the SQLite tables' row shapes and their conversions to store records. */
import type Database from "better-sqlite3";
import type {
  ClaimedMessage,
  FailureReason,
  JournalEntry,
  MessageStatus,
  RunRecord,
  RunStatus,
  StoredMessage,
} from "../../types.ts";
import { shownHold, type KeptHold } from "../../journal-rules.ts";
import type { TapeEntry } from "../../fanout-types.ts";
import type { IdempotencyRecord, StoredResponse } from "../../idempotency-types.ts";
import type { RunStateOf } from "../../wake-rules.ts";

export type Db = Database.Database;
export type Stmt = Database.Statement<unknown[], unknown>;

/** JSON in a TEXT column: SQL NULL is `undefined`. */
export const enc = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
export const dec = (s: string | null): unknown => (s === null ? undefined : (JSON.parse(s) as unknown));

export interface MsgRow {
  seq: number;
  id: string;
  signal: string;
  key: string | null;
  payload: string | null;
  parent_run_id: string | null;
  status: MessageStatus;
  ready: number;
  attempts: number;
  failures: string;
  locked_by: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  replays: number;
}

export interface RunRow {
  id: string;
  flow: string;
  status: RunStatus;
  input: string | null;
  output: string | null;
  error: string | null;
  parent_run_id: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  wake_at: number | null;
  deadline: number | null;
  status_seq: number;
  /** Migration 0003 (RunRecord.recoveries). */
  recoveries: number;
  created_at: number;
  updated_at: number;
  /** Migration 0004: the last release's note as JSON (journal-rules holdOf); absent on rows built in code. */
  held?: string | null;
}

export interface EntryRow {
  run_id: string;
  seq: number;
  kind: JournalEntry["kind"];
  name: string;
  value: string | null;
  error: string | null;
  duration: string | null;
  wake_at: number | null;
  at: number;
}

export interface IdemRow {
  key: string;
  fingerprint: string;
  status: "running" | "done";
  response: string | null;
  run_id: string;
  locked_until: number;
  created_at: number;
  expires_at: number;
}

export interface TapeRow {
  signal: string;
  key: string;
  position: number;
  id: string;
  payload: string | null;
  created_at: number;
}

export const toStored = (m: MsgRow): StoredMessage => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  payload: dec(m.payload),
  parentRunId: m.parent_run_id,
  status: m.status,
  attempts: m.attempts,
  failures: JSON.parse(m.failures) as FailureReason[],
  lockedBy: m.locked_by,
  leaseExpiresAt: m.lease_expires_at,
  createdAt: m.created_at,
  updatedAt: m.updated_at,
  ...(m.replays > 0 ? { replays: m.replays } : {}),
});

export const toClaimed = (m: MsgRow): ClaimedMessage => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  payload: dec(m.payload),
  parentRunId: m.parent_run_id,
  attempts: m.attempts,
  createdAt: m.created_at,
  lockedBy: m.locked_by!,
  leaseExpiresAt: m.lease_expires_at!,
});

export function toRun(r: RunRow): RunRecord {
  const out: RunRecord = {
    id: r.id,
    flow: r.flow,
    status: r.status,
    input: dec(r.input),
    parentRunId: r.parent_run_id,
    leaseOwner: r.lease_owner,
    leaseExpiresAt: r.lease_expires_at,
    wakeAt: r.wake_at,
    recoveries: r.recoveries,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
  const output = dec(r.output);
  if (output !== undefined) out.output = output;
  if (r.error !== null) out.error = JSON.parse(r.error) as { code: string; message: string };
  const held = shownHold(r.status, r.lease_owner, keptHold(r));
  if (held !== undefined) out.held = held;
  return out;
}

export function toEntry(e: EntryRow): JournalEntry {
  const out: JournalEntry =
    e.kind === "sleep"
      ? {
          runId: e.run_id,
          seq: e.seq,
          kind: "sleep",
          label: e.name,
          duration: e.duration!,
          wakeAt: e.wake_at!,
          at: e.at,
        }
      : { runId: e.run_id, seq: e.seq, kind: e.kind, name: e.name, at: e.at };
  const value = dec(e.value);
  if (value !== undefined) out.value = value;
  if (e.error !== null) out.error = JSON.parse(e.error) as { code: string; message: string };
  return out;
}

export const toIdem = (r: IdemRow): IdempotencyRecord => ({
  key: r.key,
  fingerprint: r.fingerprint,
  status: r.status,
  response: r.response === null ? null : (JSON.parse(r.response) as StoredResponse),
  runId: r.run_id,
  lockedUntil: r.locked_until,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

export const toTape = (t: TapeRow): TapeEntry => ({
  id: t.id,
  signal: t.signal,
  key: t.key,
  payload: dec(t.payload),
  position: t.position,
  createdAt: t.created_at,
});

/** An entry's name column. A sleep journaled before sleeps had a `label` carried it in `name`. */
export const nameOf = (e: JournalEntry): string =>
  e.kind === "sleep" ? (e.label ?? (e as unknown as { name: string }).name) : e.name;

/** The row's scheduling state by the rules' names (wake-rules.ts). */
export const stateOfRow = (r: RunRow): RunStateOf => ({
  id: r.id,
  status: r.status,
  leaseOwner: r.lease_owner,
  leaseExpiresAt: r.lease_expires_at,
  wakeAt: r.wake_at,
  recoveries: r.recoveries,
  updatedAt: r.updated_at,
});

/** The run's kept release note (migration 0004's column), or null. */
export const keptHold = (r: RunRow): KeptHold | null => (r.held ? (JSON.parse(r.held) as KeptHold) : null);
