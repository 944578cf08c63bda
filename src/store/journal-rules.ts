/** The journal write rules the memory and file drivers apply the same way: who may write, and what park, finish, release, renew, compensation, an early wake and an operator's terminate write. */
import { JournalLeaseBusy } from "../errors.ts";
import type {
  FinishRequest,
  ParkRequest,
  ReleaseRequest,
  RunHold,
  RunStatus,
  TerminateOutcome,
} from "./types.ts";
import type { BeginCompensationRequest } from "./compensation-types.ts";
import type { RunError } from "./record-types.ts";
import { leased, leaseLive, runState, type RunState, type RunStateOf } from "./wake-rules.ts";

/**
 * Fencing: a journal write is accepted from the run's `leaseOwner` while it is
 * leased (running or compensating). A holder whose lease expired may still
 * write until another owner takes the lease over — the same rule as a message
 * settle. Throws JournalLeaseBusy for anyone else.
 */
export function assertHolder(r: RunStateOf, owner: string): void {
  if (!leased(r.status) || r.leaseOwner !== owner) throw new JournalLeaseBusy(r.id);
}

/** A take with `inFlightOnly` (the orphan scan's) refuses a sleeper: it waits for its wake time. */
export function assertTakeable(r: RunStateOf, req: { inFlightOnly?: boolean | undefined }): void {
  if (req.inFlightOnly === true && r.status === "sleeping") throw new JournalLeaseBusy(r.id);
}

/** What parking the run on its sleep entry writes: sleeping until the entry's wake time, lease given up. */
export const parkState = (r: RunState, req: ParkRequest): RunState => ({
  ...runState(r),
  status: "sleeping",
  // A sleep journaled without wakeAt (older callers) wakes at once.
  wakeAt: req.entry.wakeAt ?? req.now,
  leaseOwner: null,
  leaseExpiresAt: null,
  updatedAt: req.now,
});

/**
 * What finishing the run writes: its terminal status, lease given up, and its
 * error as `{ code, message, detail? }` only (the driver stores `req.output` as given).
 */
export const finishState = (
  r: RunState,
  req: FinishRequest,
): { state: RunState; error: RunError | undefined } => ({
  state: { ...runState(r), status: req.status, leaseOwner: null, leaseExpiresAt: null, updatedAt: req.now },
  error: req.error === undefined ? undefined : runError(req.error),
});

/** The run error a driver stores: code, message and (when given) detail, nothing else of the object. */
export const runError = (e: RunError): RunError => ({
  code: e.code,
  message: e.message,
  ...(e.detail === undefined ? {} : { detail: e.detail }),
});

/**
 * What releasing the lease writes (the caller checked `owner` holds it). A
 * retry time makes a leased run due then, like an expired lease (runDeadline
 * reads it); a sleeper's reservation is just dropped.
 */
export const releaseState = (r: RunState, req: ReleaseRequest): RunState => ({
  ...runState(r),
  leaseOwner: null,
  leaseExpiresAt: leased(r.status) ? (req.retryAt ?? null) : null,
  updatedAt: req.now,
});

/** The note a store keeps for RunRecord.held: the shown hold and the journal length it was given at. */
export interface KeptHold extends RunHold {
  /** How many journal entries the run had when it was given back. */
  at: number;
}

/**
 * The note a release keeps with the run (ReleaseRequest.hold); null clears the last one. A run held
 * back is tried again every 30 s and given back each time: when the reason and the journal are the
 * same as at the last release (no step, sleep or emit since), `since` stays the first time, so an
 * operator reads how long it has waited rather than when the last try was.
 */
export const holdOf = (
  req: ReleaseRequest,
  prev: KeptHold | null | undefined,
  journalLength: number,
): KeptHold | null => {
  if (req.hold === undefined) return null;
  const { code, message } = req.hold;
  const same = prev != null && prev.code === code && prev.message === message && prev.at === journalLength;
  return { code, message, since: same ? prev.since : req.now, at: journalLength };
};

/**
 * RunRecord.held: the kept note counts only while the release it came with still stands — leased
 * status, no holder. Nothing clears it on a take, a park or a finish (no write on those paths grows
 * for it); it simply stops being shown, and the next release writes its own (or none).
 */
export const shownHold = (
  status: RunStatus,
  leaseOwner: string | null,
  hold: RunHold | null | undefined,
): RunHold | undefined =>
  hold == null || leaseOwner !== null || !leased(status)
    ? undefined
    : { code: hold.code, message: hold.message, since: hold.since };

/** What renewing the holder's lease writes (the caller checked it holds it). */
export const renewState = (r: RunState, req: { now: number; leaseMs: number }): RunState => ({
  ...runState(r),
  leaseExpiresAt: req.now + req.leaseMs,
  updatedAt: req.now,
});

/**
 * What beginning compensation writes for the holder (checked by the caller):
 * running → compensating, the failure becomes the run's error. A run that is
 * not running (already compensating) refuses with JournalLeaseBusy, like a write.
 */
export function compensateState(
  r: RunStateOf,
  req: BeginCompensationRequest,
): { state: RunState; error: RunError } {
  if (r.status !== "running") throw new JournalLeaseBusy(r.id);
  return {
    state: { ...runState(r), status: "compensating", updatedAt: req.now },
    error: runError(req.error),
  };
}

/** What waking a run early writes: a sleeper's wake time moves to now (never later); null when it is not sleeping. */
export const wakeEarlyState = (r: RunState, now: number): RunState | null =>
  r.status !== "sleeping"
    ? null
    : { ...runState(r), wakeAt: r.wakeAt === null || r.wakeAt > now ? now : r.wakeAt, updatedAt: now };

/**
 * What an operator's terminate (JournalStore.terminateRun) decides: a refusal to answer as it is —
 * `final` for an ended run, `held` while anyone's lease is live (a running run's, or a sleeper's
 * reservation: the take rules' leaseLive) — else the state it writes: failed, lease and wake time
 * cleared (never due again).
 */
export function terminateState(
  r: RunState,
  now: number,
): { refused: Exclude<TerminateOutcome, { outcome: "terminated" | "missing" }> } | { state: RunState } {
  if (r.status === "completed" || r.status === "failed")
    return { refused: { outcome: "final", status: r.status } };
  if (leaseLive(r, now) && r.leaseOwner !== null && r.leaseExpiresAt !== null)
    return { refused: { outcome: "held", leaseOwner: r.leaseOwner, leaseExpiresAt: r.leaseExpiresAt } };
  return {
    state: {
      ...runState(r),
      status: "failed",
      leaseOwner: null,
      leaseExpiresAt: null,
      wakeAt: null,
      updatedAt: now,
    },
  };
}

/**
 * The first `head` and last `tail` of `all` (Store.getJournalEnds): the two never overlap, and a
 * list of `head + tail` or fewer is all in `head`. Counts below 0 or fractions read as whole numbers from 0.
 */
export function endsOf<T>(
  all: readonly T[],
  head: number,
  tail: number,
): { head: T[]; tail: T[]; count: number } {
  const h = wholeCount(head);
  const t = wholeCount(tail);
  if (all.length <= h + t) return { head: [...all], tail: [], count: all.length };
  return { head: all.slice(0, h), tail: t === 0 ? [] : all.slice(all.length - t), count: all.length };
}

/** A count the caller gave as a non-negative integer (NaN and negatives are 0). */
export const wholeCount = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
