/** Rules every driver shares for a graceful stop's claims (QueueStore.leaveClaimsToLease). */
import { isStoppedOwner, stoppedOwner } from "./wake-rules.ts";
import type { ClaimRelease } from "./types.ts";

/** The fields of a stored message the rule reads. */
export interface ClaimState {
  status: string;
  lockedBy: string | null;
  attempts: number;
}

/**
 * Where a claim `c` stands for leaveClaimsToLease: `held` — still `inflight` under (`c.worker`,
 * `c.attempt`), so the stop marks it (holder `<worker>#stopped`; attempts, lease and expiry kept);
 * `already` — a retry of that mark finds it made (reported again, nothing written); `gone` —
 * settled, released or claimed again: left alone.
 */
export function leftClaim(m: ClaimState, c: ClaimRelease): "held" | "already" | "gone" {
  if (m.status !== "inflight") return "gone";
  if (m.lockedBy === c.worker && m.attempts === c.attempt) return "held";
  if (m.lockedBy === stoppedOwner(c.worker) && m.attempts === c.attempt) return "already";
  return "gone";
}

/**
 * What a claim adds to a message's attempts: 1, but 0 when it reclaims a lease a graceful stop left
 * to lapse (its holder `<worker>#stopped`): that attempt was cut short by a deploy, not spent, so it
 * runs again as the same attempt. A lapse with no mark (a crash, a hang) counts, as it always did.
 */
export const claimCounts = (lockedBy: string | null): 0 | 1 =>
  lockedBy !== null && isStoppedOwner(lockedBy) ? 0 : 1;
