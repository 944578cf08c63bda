/** Store contract for the Console: paged listings, throughput, instance heartbeats and the operator audit log. */
import type { MessageStatus, RunRecord, RunStatus, StoredMessage } from "./record-types.ts";

/** One page of a keyset-paged listing. `next` is an opaque cursor for the following page, null at the end. */
export interface Page<T> {
  items: T[];
  next: string | null;
}

export interface MessagePageRequest {
  signal: string;
  status: MessageStatus;
  /** Cursor from the previous page's `next`. */
  cursor?: string | null;
  limit: number;
  /** Dead letters only: newest first (creation, then emit order, descending), the reverse of the default. */
  newestFirst?: boolean;
}

export interface RunPageRequest {
  status?: RunStatus;
  flow?: string;
  /** Children of this run only. */
  parentRunId?: string;
  /** createdAt >= since (epoch ms). */
  since?: number;
  /** createdAt < until (epoch ms). */
  until?: number;
  /** Sleeping runs whose current sleep (the last sleep entry of the journal) has this label. */
  sleepLabel?: string;
  /**
   * Only runs held back: running or compensating, no holder, given back with a reason
   * (RunRecord.held present). Drivers without releaseHold find none.
   */
  held?: boolean;
  cursor?: string | null;
  limit: number;
}

/** Delivered messages of one signal per minute, oldest minute first. */
export interface Throughput {
  signal: string;
  /** Epoch ms of the first bucket's start. */
  from: number;
  bucketMs: number;
  delivered: number[];
}

/** What an app instance tells the fleet about itself, refreshed by its heartbeat. */
export interface InstanceInfo {
  id: string;
  /** The app's package version (its package.json), or okengine's when unknown. */
  version: string;
  okengineVersion: string;
  host: string;
  pid: number;
  env: string;
  startedAt: number;
  /** Flows bound in this instance, and the once signals it consumes. */
  flows: string[];
  signals: string[];
  /** The Console address it serves, if any. */
  console: string | null;
  /**
   * What it runs (instance.role): `all`, `web` (HTTP and emits, no background work) or `worker`
   * (background work, no routes). Absent from an instance older than the field: read it as `all`.
   */
  role?: "all" | "web" | "worker";
}

/**
 * One queue's backlog: messages waiting for a consumer (`pending`) or held by one (`inflight`).
 * Delivered and dead messages are not backlog.
 */
export interface QueueBacklog {
  /** The queue's name: a once signal, or a broadcast signal's copies of one flow (`~broadcast:<signal>:<flow>`). */
  signal: string;
  pending: number;
  inflight: number;
  /** Emit time (createdAt) of the oldest pending message, null when none is pending. */
  oldestPendingCreatedAt: number | null;
  /** Earliest leaseExpiresAt of an inflight message, null when none is inflight. */
  earliestLeaseExpiry: number | null;
}

export interface InstanceRecord extends InstanceInfo {
  /** Last heartbeat (epoch ms). */
  seenAt: number;
}

/** One operator action. Never holds message payloads. */
export interface AuditEntry {
  at: number;
  /** The label of the token used ("dev (open)" when the Console runs open). */
  actor: string;
  /** replay · discard · wake · pause · resume · edit · trigger */
  action: string;
  /** What it acted on: "signal:orders.created", "run:r_123", "schedule:nightly". */
  target: string;
  /** Counts, ids, options (dryRun, rate) — JSON, no payloads. */
  detail: Record<string, unknown>;
}

export interface AuditRecord extends AuditEntry {
  /** Store-assigned, increasing. */
  id: number;
}

export interface ConsoleStore {
  /** Messages of one signal in one status, oldest first (delivered, and dead with `newestFirst`: newest first), keyset-paged. */
  pageMessages(req: MessagePageRequest): Promise<Page<StoredMessage>>;
  /** Runs matching the filter, newest first (createdAt, then id, descending), keyset-paged. */
  pageRuns(req: RunPageRequest): Promise<Page<RunRecord>>;
  /** Counts of runs per flow and status. */
  runCounts(): Promise<Array<{ flow: string; status: RunStatus; count: number }>>;
  /**
   * Every queue with pending or inflight messages, by name — whether or not any app still declares
   * it (the Console's stranded work: a signal removed from the code keeps its messages).
   */
  queueBacklog(): Promise<QueueBacklog[]>;
  /** Delivered messages per `bucketMs` for every signal that delivered any since `from`. */
  throughput(from: number, bucketMs: number, now: number): Promise<Throughput[]>;
  /** Records (or refreshes) an instance's heartbeat at `now`. */
  heartbeat(info: InstanceInfo, now: number): Promise<void>;
  /** Instances whose last heartbeat is at or after `since`, oldest start first. */
  listInstances(since: number): Promise<InstanceRecord[]>;
  /** An instance stopping cleanly leaves the list at once. */
  removeInstance(id: string): Promise<void>;
  /** Appends to the audit log; resolves once durable. */
  recordAudit(entry: AuditEntry): Promise<AuditRecord>;
  /** Newest first, keyset-paged. */
  pageAudit(req: { cursor?: string | null; limit: number }): Promise<Page<AuditRecord>>;
}
