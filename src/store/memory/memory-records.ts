/** The records the memory engine keeps for messages and runs. */
import { cloneJson } from "./clone-json.ts";
import { storedError } from "../journal-same.ts";
import { runError, shownHold, type KeptHold } from "../journal-rules.ts";
import type { HeapSlot } from "./min-heap.ts";
import type {
  ClaimedMessage,
  FailureReason,
  JournalEntry,
  MessageStatus,
  NewMessage,
  RunError,
  RunRecord,
  RunStatus,
  StoredMessage,
} from "../types.ts";

/** A stored message as the engine keeps it: mutable, plus its emit order and heap slot. */
export interface MsgRec extends HeapSlot {
  id: string;
  signal: string;
  key: string | null;
  payload: unknown;
  parentRunId: string | null;
  status: MessageStatus;
  attempts: number;
  failures: FailureReason[];
  lockedBy: string | null;
  leaseExpiresAt: number | null;
  createdAt: number;
  updatedAt: number;
  /** Operator replays so far (StoredMessage.replays); 0 when never. */
  replays: number;
  /** Engine-assigned emit order; per-key FIFO and "oldest" follow it. */
  seq: number;
  /** AgeIndex's mark: 0 never in its in-order queue, 1 in it, 2 left it (a stale entry may remain). */
  ageQueued: 0 | 1 | 2;
}

/** A durable run as the engine keeps it, with its journal sorted by seq. */
export interface RunRec extends HeapSlot {
  id: string;
  flow: string;
  status: RunStatus;
  input: unknown;
  output: unknown;
  error: RunError | undefined;
  parentRunId: string | null;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  wakeAt: number | null;
  /** RunRecord.recoveries. */
  recoveries: number;
  createdAt: number;
  updatedAt: number;
  entries: JournalEntry[];
  /** The last release's note (journal-rules holdOf), shown as RunRecord.held while it stands. */
  hold?: KeptHold | null;
}

export const cloneFailure = (f: FailureReason): FailureReason => ({
  code: f.code,
  message: f.message,
  at: f.at,
  attempt: f.attempt,
});

export function newMsgRec(m: NewMessage, now: number, seq: number): MsgRec {
  return {
    heapIndex: -1,
    id: m.id,
    signal: m.signal,
    key: m.key,
    payload: cloneJson(m.payload),
    parentRunId: m.parentRunId,
    status: "pending",
    attempts: 0,
    failures: [],
    lockedBy: null,
    leaseExpiresAt: null,
    createdAt: now,
    updatedAt: now,
    replays: 0,
    seq,
    ageQueued: 0,
  };
}

export function msgRecFromSnapshot(s: StoredMessage & { seq: number }): MsgRec {
  return {
    heapIndex: -1,
    id: s.id,
    signal: s.signal,
    key: s.key,
    payload: cloneJson(s.payload),
    parentRunId: s.parentRunId,
    status: s.status,
    attempts: s.attempts,
    failures: s.failures.map(cloneFailure),
    lockedBy: s.lockedBy,
    leaseExpiresAt: s.leaseExpiresAt,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    replays: s.replays ?? 0,
    seq: s.seq,
    ageQueued: 0,
  };
}

export function toStoredMessage(m: MsgRec): StoredMessage {
  return {
    id: m.id,
    signal: m.signal,
    key: m.key,
    payload: cloneJson(m.payload),
    parentRunId: m.parentRunId,
    status: m.status,
    attempts: m.attempts,
    failures: m.failures.map(cloneFailure),
    lockedBy: m.lockedBy,
    leaseExpiresAt: m.leaseExpiresAt,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    ...(m.replays > 0 ? { replays: m.replays } : {}),
  };
}

export function toClaimedMessage(m: MsgRec): ClaimedMessage {
  return {
    id: m.id,
    signal: m.signal,
    key: m.key,
    payload: cloneJson(m.payload),
    parentRunId: m.parentRunId,
    attempts: m.attempts,
    createdAt: m.createdAt,
    lockedBy: m.lockedBy!,
    leaseExpiresAt: m.leaseExpiresAt!,
  };
}

/**
 * A detached copy. A sleep journaled before sleeps had a `label` (file logs of
 * older versions) carried it in `name`: it is read as the label.
 */
export function cloneEntry(e: JournalEntry, runId: string): JournalEntry {
  const out: JournalEntry =
    e.kind === "sleep"
      ? {
          runId,
          seq: e.seq,
          kind: "sleep",
          label: e.label ?? (e as unknown as { name: string }).name,
          duration: e.duration,
          wakeAt: e.wakeAt,
          at: e.at,
        }
      : { runId, seq: e.seq, kind: e.kind, name: e.name, at: e.at };
  if (e.value !== undefined) out.value = cloneJson(e.value);
  if (e.error !== undefined) out.error = storedError(e.error);
  return out;
}

export function toRunRecord(r: RunRec): RunRecord {
  const out: RunRecord = {
    id: r.id,
    flow: r.flow,
    status: r.status,
    input: cloneJson(r.input),
    parentRunId: r.parentRunId,
    leaseOwner: r.leaseOwner,
    leaseExpiresAt: r.leaseExpiresAt,
    wakeAt: r.wakeAt,
    recoveries: r.recoveries,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
  if (r.output !== undefined) out.output = cloneJson(r.output);
  if (r.error !== undefined) out.error = cloneJson(runError(r.error));
  const held = shownHold(r.status, r.leaseOwner, r.hold);
  if (held !== undefined) out.held = held;
  return out;
}
