/** The journal write rules the memory and file drivers apply the same way: who may write, and what park, finish and release write. */
import { JournalLeaseBusy } from "../errors.ts";
import type { FinishRequest, ParkRequest, ReleaseRequest } from "./types.ts";
import { leased, runState, type RunState, type RunStateOf } from "./wake-rules.ts";

/**
 * Fencing: a journal write is accepted from the run's `leaseOwner` while it is
 * leased (running or compensating). A holder whose lease expired may still
 * write until another owner takes the lease over — the same rule as a message
 * settle. Throws JournalLeaseBusy for anyone else.
 */
export function assertHolder(r: RunStateOf, owner: string): void {
  if (!leased(r.status) || r.leaseOwner !== owner) throw new JournalLeaseBusy(r.id);
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
 * error as `{ code, message }` only (the driver stores `req.output` as given).
 */
export const finishState = (
  r: RunState,
  req: FinishRequest,
): { state: RunState; error: { code: string; message: string } | undefined } => ({
  state: { ...runState(r), status: req.status, leaseOwner: null, leaseExpiresAt: null, updatedAt: req.now },
  error: req.error === undefined ? undefined : { code: req.error.code, message: req.error.message },
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
