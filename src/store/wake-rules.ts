/** The lease and wake rules the memory and file drivers apply the same way: when a run is due, to whom, and what a claim writes. */
import { JournalLeaseBusy } from "../errors.ts";
import { storeErrors } from "./index.ts";
import type { RunStatus } from "./types.ts";

/**
 * A run's scheduling state: what the lease and wake rules read and what a
 * claim, take, park or finish writes. The memory engine keeps these fields by
 * these names; the file engine maps its row's columns to and from them.
 */
export interface RunState {
  status: RunStatus;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  wakeAt: number | null;
  recoveries: number;
  updatedAt: number;
}

/** A run the rules decide about: its state plus the id errors name. */
export type RunStateOf = RunState & { readonly id: string };

/** Running and compensating runs are leased, fenced, and taken over once their lease lapses. */
export const leased = (status: RunStatus): boolean => status === "running" || status === "compensating";

export const leaseLive = (r: RunState, now: number): boolean =>
  r.leaseOwner !== null && r.leaseExpiresAt !== null && r.leaseExpiresAt > now;

/**
 * When the run next needs an owner: its wake time if sleeping, its lease
 * expiry if leased; null = never (terminal, released). A reserved sleeper
 * (lease taken ahead of its wake, still sleeping) is due to others once both
 * its wake time and its reservation lease have passed.
 */
export const runDeadline = (r: RunState): number | null =>
  r.status === "sleeping"
    ? r.wakeAt === null
      ? null
      : Math.max(r.wakeAt, r.leaseOwner !== null && r.leaseExpiresAt !== null ? r.leaseExpiresAt : -Infinity)
    : leased(r.status)
      ? r.leaseExpiresAt
      : null;

/** When a claim by `owner` finds the run due: its own reservation is due at its wake time. */
export const dueAtFor = (r: RunState, owner: string): number | null =>
  r.status === "sleeping" && r.leaseOwner === owner ? r.wakeAt : runDeadline(r);

/** The horizon a claim takes sleepers up to: `sleepersDueBy`, never before `now`. */
export const sleepersHorizon = (now: number, sleepersDueBy: number | undefined): number =>
  Math.max(now, sleepersDueBy ?? now);

/**
 * A claim walking runs in deadline order passes over one found at `deadline`
 * (already <= the horizon) when it is not due yet at `now` and is not a free
 * sleeper: a live lease (a running run's, or a sleeper's reservation) is
 * never taken before it lapses. The file engine's due() says this in SQL.
 */
export const passedByWalk = (r: RunState, deadline: number, now: number): boolean =>
  deadline > now && (r.status !== "sleeping" || leaseLive(r, now));

/**
 * A claim by `owner` of this one run (claimDueRuns with runIds): the deadline
 * it is due at, or null when it is not claimable — never due, a sleeper due
 * after `horizon`, another run not due by `now`, or another's live lease.
 */
export function dueForClaim(r: RunState, owner: string, now: number, horizon: number): number | null {
  const at = dueAtFor(r, owner);
  if (at === null || at > (r.status === "sleeping" ? horizon : now)) return null;
  if (r.leaseOwner !== owner && leaseLive(r, now)) return null;
  return at;
}

/**
 * Whether `owner` taking the run (its lease not live, or `owner`'s) takes it
 * over from another holder that may have run some of it: a running or
 * compensating run's lapsed lease, or a reservation that lapsed after its wake
 * time — its holder was past the wake and may have died in the step after the
 * sleep before its resuming claim committed. Not a free sleeper's wake, not a
 * reservation that lapsed before its wake time (nothing ran), not a released
 * run or reservation (no owner), not the holder itself.
 */
export const takeIsRecovery = (r: RunState, owner: string): boolean =>
  r.leaseOwner !== null &&
  r.leaseOwner !== owner &&
  r.leaseExpiresAt !== null &&
  (leased(r.status) || (r.status === "sleeping" && r.wakeAt !== null && r.wakeAt < r.leaseExpiresAt));

/**
 * What taking the run's lease for `owner` writes: refused for terminal runs
 * and for another's live lease; one more recovery when takeIsRecovery.
 */
export function takeLease(r: RunStateOf, owner: string, now: number, leaseMs: number): RunState {
  if (r.status === "completed" || r.status === "failed") throw storeErrors.runTerminal(r.id, r.status);
  if (leaseLive(r, now) && r.leaseOwner !== owner) throw new JournalLeaseBusy(r.id);
  const recovered = takeIsRecovery(r, owner);
  return {
    status: r.status === "sleeping" ? "running" : r.status,
    leaseOwner: owner,
    leaseExpiresAt: now + leaseMs,
    wakeAt: null,
    recoveries: recovered ? r.recoveries + 1 : r.recoveries,
    updatedAt: now,
  };
}

/**
 * What claimDueRuns writes for a run it found due: a sleeper not yet due
 * (claimed ahead under sleepersDueBy) is reserved — the lease is taken, the
 * run stays sleeping with its wakeAt; its holder's later claim resumes it.
 * Reserving counts no recovery: a lapsed reservation is reserved again only
 * while its wake time is ahead, so its lease lapsed before it (nothing ran).
 * Anything else is taken (takeLease).
 */
export function claimLease(r: RunStateOf, owner: string, now: number, leaseMs: number): RunState {
  if (r.status !== "sleeping" || r.wakeAt === null || r.wakeAt <= now || r.leaseOwner === owner)
    return takeLease(r, owner, now, leaseMs);
  return { ...runState(r), leaseOwner: owner, leaseExpiresAt: now + leaseMs, updatedAt: now };
}

/** Just the state fields of `r` (a record may carry more): what a rule returns changed. */
export const runState = (r: RunState): RunState => ({
  status: r.status,
  leaseOwner: r.leaseOwner,
  leaseExpiresAt: r.leaseExpiresAt,
  wakeAt: r.wakeAt,
  recoveries: r.recoveries,
  updatedAt: r.updatedAt,
});
