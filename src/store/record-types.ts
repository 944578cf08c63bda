// The records the Store contract carries: messages, their failures, runs (re-exported by types.ts).

export type MessageStatus = "pending" | "inflight" | "delivered" | "dead";

/** One failed attempt, appended to the message's history. */
export interface FailureReason {
  /** Machine-readable code: an OkeError code, an Error's `code`, or "Error". */
  code: string;
  message: string;
  /** Epoch ms when the attempt failed. */
  at: number;
  /** 1-based attempt number that failed. */
  attempt: number;
}

/** The spec's name for {@link FailureReason}: what each failed attempt appends to `failures`. */
export type SignalFailureReason = FailureReason;

export interface NewMessage {
  /** Unique message id (the runtime generates it). */
  id: string;
  signal: string;
  /** Per-key FIFO partition; null for the unkeyed competing pool. */
  key: string | null;
  /** Already validated against the signal's schema; JSON-serialisable. */
  payload: unknown;
  /** The run that emitted it, for trace chains. */
  parentRunId: string | null;
}

export interface StoredMessage extends NewMessage {
  status: MessageStatus;
  attempts: number;
  failures: FailureReason[];
  lockedBy: string | null;
  leaseExpiresAt: number | null;
  createdAt: number;
  updatedAt: number;
  /**
   * How many times an operator replayed it (`Store.replay`); absent when never. A durable
   * consumer derives the run of a replayed delivery from it (`<id>.r<replays>`), so a replay
   * starts a fresh run when the message's own run already failed.
   */
  replays?: number;
}

/** `compensating`: the run failed and its `undo`s are running; it ends `failed`. */
export type RunStatus = "running" | "sleeping" | "compensating" | "completed" | "failed";

/**
 * A failed run's error: its code and message, and `detail` when the runtime gave one — the journal's
 * form of the error (its name, own fields, cause, an OkeError's status), which rebuilds the error a
 * caller catches. A driver stores it as given (JSON) and returns it as stored.
 */
export interface RunError {
  code: string;
  message: string;
  detail?: unknown;
}

export interface RunRecord {
  id: string;
  flow: string;
  status: RunStatus;
  input: unknown;
  /** Return value once completed. */
  output?: unknown;
  /** Error once failed (and while compensating): see RunError. */
  error?: RunError;
  parentRunId: string | null;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  /** Set while sleeping. */
  wakeAt: number | null;
  /**
   * Recoveries: how many times the run was taken over after its lease lapsed — its holder died,
   * hung past its lease or lost the store — by the claim, acquire or start that took it (counted
   * in the same write). A wake of a sleeping run, a released run taken again and a holder renewing
   * its own lease are not recoveries. The runtime ends a run past `durable.maxRecoveries`.
   */
  recoveries: number;
  createdAt: number;
  updatedAt: number;
  /**
   * Why the run waits with no holder: its last holder gave it back with a reason
   * (`ReleaseRequest.hold`), e.g. OKE1301 when its journal does not match the code the deploy runs.
   * Present only while that is so — running or compensating, no holder — and absent once anyone
   * holds it again or it parks or ends. Operators see it (Console, `oke run`, `oke status`).
   */
  held?: RunHold;
}

/** A reason a run was given back, kept with it until someone holds it again (RunRecord.held). */
export interface RunHold {
  code: string;
  message: string;
  /**
   * When it was first given back with this reason: a run tried again and given back for the same
   * reason, its journal unchanged, keeps the first release's `now`.
   */
  since: number;
}

export interface Unsubscribe {
  (): void;
}
