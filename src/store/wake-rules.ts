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
 * What a graceful stop appends to the owner of a lease it leaves to lapse (JournalStore.leaveToLease):
 * the lease stays live for everyone else until it lapses, and the take after that is no recovery.
 * Holders the runtime names `<instance>/<n>` never end with it.
 */
export const STOPPED_OWNER_SUFFIX = "#stopped";

/** The owner a lease held by `owner` has once a graceful stop left it to lapse (idempotent). */
export const stoppedOwner = (owner: string): string =>
  owner.endsWith(STOPPED_OWNER_SUFFIX) ? owner : `${owner}${STOPPED_OWNER_SUFFIX}`;

/** True for a lease a graceful stop left to lapse: its holder was stopping, not dying. */
export const isStoppedOwner = (owner: string): boolean => owner.endsWith(STOPPED_OWNER_SUFFIX);

/**
 * Whether `owner` taking the run (its lease not live, or `owner`'s) takes it
 * over from another holder that may have run some of it: a running or
 * compensating run's lapsed lease, or a reservation that lapsed after its wake
 * time — its holder was past the wake and may have died in the step after the
 * sleep before its resuming claim committed. Not a free sleeper's wake, not a
 * reservation that lapsed before its wake time (nothing ran), not a released
 * run or reservation (no owner), not the holder itself, and not a lease a
 * graceful stop left to lapse (isStoppedOwner: its holder was stopping, not dying).
 */
export const takeIsRecovery = (r: RunState, owner: string): boolean =>
  r.leaseOwner !== null &&
  r.leaseOwner !== owner &&
  !isStoppedOwner(r.leaseOwner) &&
  r.leaseExpiresAt !== null &&
  (leased(r.status) || (r.status === "sleeping" && r.wakeAt !== null && r.wakeAt < r.leaseExpiresAt));

/** The holder a take (`before` → `after`) recovered the run from, when it counted a recovery (AcquiredRun.recoveredFrom). */
export const recoveredFrom = (
  before: Pick<RunState, "recoveries" | "leaseOwner">,
  after: Pick<RunState, "recoveries">,
): string | undefined =>
  after.recoveries > before.recoveries && before.leaseOwner !== null ? before.leaseOwner : undefined;

/**
 * What a graceful stop's leaveToLease writes for a run `owner` still holds
 * (running or compensating): the owner becomes stoppedOwner(owner), the expiry
 * stays. Null when `owner` holds no such lease (the run ended, parked, was
 * released or taken) — or, for a retry, already left it: then the state is
 * unchanged and `left` says so.
 */
export function leaveState(
  r: RunState,
  owner: string,
  now: number,
): { state: RunState | null; left: boolean } {
  if (!leased(r.status) || r.leaseOwner === null) return { state: null, left: false };
  if (r.leaseOwner === stoppedOwner(owner)) return { state: null, left: true };
  if (r.leaseOwner !== owner) return { state: null, left: false };
  return { state: { ...runState(r), leaseOwner: stoppedOwner(owner), updatedAt: now }, left: true };
}

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
