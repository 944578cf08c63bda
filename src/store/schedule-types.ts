/** ScheduleStore: the schedule half of the Store contract (schedules, their state, fire). */
/**
 * The schedule half of the Store contract: schedules with their state, and
 * `fire`, which records a (clock, slot) under a unique key in the same commit
 * that enqueues the fire's once message — so a second instance's fire of the
 * same slot changes nothing.
 */
import type { NewMessage } from "./record-types.ts";

/** What decides when a schedule fires. Exactly one of `cron` / `every` is set. */
export interface ScheduleSpec {
  /** Five fields `m h dom mon dow`, or a nickname such as `@daily`. */
  cron: string | null;
  /** An interval in the duration grammar (`"1h"`): slots are multiples of it since the epoch. */
  every: string | null;
  /** IANA zone the cron fields are read in. Intervals ignore it. */
  timezone: string;
}

/** What the code declares for one clock (reconciled at boot). */
export interface DeclaredSchedule {
  name: string;
  spec: ScheduleSpec;
  overridable: boolean;
  /** The flow it fires. */
  flow: string;
  description: string | null;
}

export interface ScheduleError {
  /** The slot whose fire failed. */
  slot: number;
  code: string;
  message: string;
  at: number;
}

export interface ScheduleRecord {
  name: string;
  /** The spec the code declares. */
  declared: ScheduleSpec;
  /** An operator's edit; when set it is what fires (see docs/clock.md "which wins"). */
  override: ScheduleSpec | null;
  overridable: boolean;
  flow: string;
  description: string | null;
  paused: boolean;
  /** No longer declared by the code that last booted; kept with its history, never fired. */
  orphaned: boolean;
  /** Bumped by every change of the effective spec and by resume; a fire names the version it computed with. */
  version: number;
  /** Slots at or before this instant are never due (creation, spec change, resume). */
  anchorAt: number;
  /** The latest slot fired, or null. */
  lastSlot: number | null;
  /** When that fire was recorded. */
  lastFiredAt: number | null;
  /** Slots skipped by that fire (catch-up one). */
  lastMissedRuns: number;
  lastError: ScheduleError | null;
  createdAt: number;
  updatedAt: number;
}

/** The spec that fires: the operator's override, else the declared one. */
export const effectiveSpec = (r: ScheduleRecord): ScheduleSpec => r.override ?? r.declared;

export interface FireRequest {
  name: string;
  slot: number;
  /** The record version the slot was computed from; a fire of an older version changes nothing. */
  version: number;
  missedRuns: number;
  now: number;
  /** The once message delivering the fire (id derived from the slot). */
  message: NewMessage;
  /**
   * Claim at fire: write the message already claimed by this worker (inflight,
   * attempt 1, `leaseExpiresAt` on the worker's clock, like any claim) and do
   * not announce it, so the firing instance runs it with no claim round trip.
   * Honoured by `fireBatch` of drivers with `enqueueClaimed` (postgres); the
   * others store the message pending as usual.
   */
  claim?: { worker: string; leaseExpiresAt: number };
}

/** One recorded fire: the schedule's history. */
export interface ScheduleFire {
  name: string;
  slot: number;
  firedAt: number;
  missedRuns: number;
  messageId: string;
}

/** How a reconcile treats the stored clocks the declared list leaves out. */
export interface ReconcileOptions {
  /** Mark them orphaned (default true, what a boot does); false leaves them as they are. */
  orphanMissing?: boolean;
}

export interface ScheduleStore {
  /**
   * Brings the stored schedules in line with what the code declares, in one
   * commit: new ones are created (anchored at `now`); a changed declaration is
   * stored, and becomes the effective spec unless an operator override of a
   * still-overridable clock exists (the override wins); a clock that is no
   * longer overridable loses its override; undeclared ones are marked
   * orphaned (never deleted) unless `options.orphanMissing` is false (an
   * instance taking back the clocks it declares, which another instance's
   * boot marked orphaned, orphans nothing of others). Returns every schedule.
   */
  reconcileSchedules(
    declared: readonly DeclaredSchedule[],
    now: number,
    options?: ReconcileOptions,
  ): Promise<ScheduleRecord[]>;
  listSchedules(): Promise<ScheduleRecord[]>;
  getSchedule(name: string): Promise<ScheduleRecord | undefined>;
  /**
   * Pause or resume; undefined when no such schedule. Resuming re-anchors at
   * `now` (slots that passed while paused are skipped, not caught up).
   */
  setSchedulePaused(name: string, paused: boolean, now: number): Promise<ScheduleRecord | undefined>;
  /**
   * Sets (or with null clears) the operator override, re-anchoring at `now`.
   * Undefined when no such schedule; throws ScheduleNotOverridableError when
   * the schedule is not overridable.
   */
  overrideSchedule(name: string, spec: ScheduleSpec | null, now: number): Promise<ScheduleRecord | undefined>;
  /**
   * Records the fire of `(name, slot)` and enqueues its message in one commit.
   * Applies only if the schedule exists at `version`, is neither paused nor
   * orphaned, the slot is newer than its last fired slot, and `(name, slot)`
   * was never fired; otherwise changes nothing and returns false.
   */
  fire(req: FireRequest): Promise<boolean>;
  /**
   * `fire` for many schedules at once (at most one request per schedule), in
   * one commit on postgres; answers per request. A schedule another caller
   * is firing at this very moment may be skipped (false) instead of waited
   * for: that caller decides its slot.
   */
  fireBatch(reqs: readonly FireRequest[]): Promise<boolean[]>;
  /** Notes a fire's failure (or with null, a later success clearing it). No-op for unknown names. */
  recordScheduleError(name: string, error: ScheduleError | null, now: number): Promise<void>;
  /** Fires of one schedule, newest first. */
  listFires(name: string, limit?: number): Promise<ScheduleFire[]>;
  /** Deletes fire records older than `before`, keeping each schedule's latest. Returns how many. */
  pruneFires(before: number): Promise<number>;
  /**
   * Optional: the store's own clock (epoch ms), shared by every instance.
   * Drivers of one process leave it out; postgres reads the server's clock so
   * schedules agree across hosts whose clocks differ. Never used under time travel.
   */
  storeTime?(): Promise<number>;
}
