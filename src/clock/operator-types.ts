/** The operator surface of schedules (app.operator.schedules): what the Console lists and calls. */

/** A schedule as an operator sees it. Times are epoch ms. */
export interface ScheduleView {
  name: string;
  /** The flow its fires run, as last declared. */
  flow: string;
  description: string | null;
  /** The spec that fires now: the operator's edit when there is one, else the code's. */
  cron: string | null;
  every: string | null;
  timezone: string;
  /**
   * What this instance's code declares, whatever an operator edited or another version stored. For a
   * clock this app does not declare (orphaned), the declaration stored by the code that last did.
   */
  declared: { cron: string | null; every: string | null; timezone: string };
  /**
   * The declaration in the store when it is not this app's: an instance of another version of the
   * app booted last (a rolling deploy) and its spec fires for the whole fleet (unless an operator
   * edit is in force). Null when the store holds this app's declaration.
   */
  declaredElsewhere: { cron: string | null; every: string | null; timezone: string } | null;
  /** With `declaredElsewhere`: both specs, which fires and why, and what to do. Null otherwise. */
  declaredElsewhereNote: string | null;
  /** An operator edit is in force. */
  overridden: boolean;
  overridable: boolean;
  paused: boolean;
  /** No longer declared by the app; kept with its history, never fired. */
  orphaned: boolean;
  /** The next slot that will fire; null when paused, orphaned or never again. */
  nextFireAt: number | null;
  /** The slot of the last fire. */
  lastScheduledAt: number | null;
  /** When the last fire was recorded. */
  lastFiredAt: number | null;
  /** How far the last fire was recorded behind its slot (lastFiredAt - lastScheduledAt). */
  lagMs: number | null;
  /** Slots the last fire skipped (catch-up one after downtime). */
  missedRuns: number;
  /** The last failed attempt of a fire, cleared by a later success. */
  lastError: { slot: number; code: string; message: string; at: number } | null;
  /** DST gaps/overlaps in the coming year that this cron meets. */
  dstNotes: string[];
}

/** An operator's edit: a new cron or a new interval (exactly one), and/or a new zone. */
export interface ScheduleEdit {
  cron?: string;
  every?: string;
  timezone?: string;
}

/** What `trigger` enqueued. */
export interface TriggerResult {
  clock: string;
  /** The id of the fire's message (and the run id of a durable clock flow). */
  messageId: string;
  scheduledAt: number;
}

/**
 * Operator API of schedules. Unknown names throw ClockResourceNotFoundError
 * (`cron "<name>" not found`); editing a clock that is not overridable throws
 * ScheduleNotOverridableError (`clock "<name>" is not overridable`).
 */
export interface ScheduleOperatorApi {
  /** Every schedule in the store, including orphaned ones, by name. */
  list(): Promise<ScheduleView[]>;
  get(name: string): Promise<ScheduleView>;
  /** Stops firing (any clock); survives restarts. Idempotent. */
  pause(name: string): Promise<ScheduleView>;
  /** Fires again from the next slot on; slots passed while paused are skipped. Idempotent. */
  resume(name: string): Promise<ScheduleView>;
  /** Replaces cron/every/timezone of an overridable clock; wins over the code until `reset`. */
  edit(name: string, edit: ScheduleEdit): Promise<ScheduleView>;
  /** Drops the operator's edit: the code's spec fires again. */
  reset(name: string): Promise<ScheduleView>;
  /** Fires now, outside the schedule (does not move the schedule's last slot). */
  trigger(name: string): Promise<TriggerResult>;
}
