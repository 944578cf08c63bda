/** The attempt budget of a once message: when a claim finds it spent, and the settlement that says so. */
import type { ClaimedMessage, Settlement } from "../store/types.ts";
import type { OnceSignal } from "./signal.ts";

/** Failure code of an attempt that never reported back: its handler ran past its lease, crashed, hung, or its process died. */
export const LEASE_EXPIRED = "LEASE_EXPIRED";

/** A lease as log and failure text: 30000 → "30 s". */
export function leaseSeconds(ms: number): string {
  return `${ms / 1000} s`;
}

/**
 * True when this claim is past the budget: `attempts` counts the claim itself,
 * so `retries + 1` attempts were already made and the last one never settled.
 */
export function budgetSpent(m: Pick<ClaimedMessage, "attempts">, s: Pick<OnceSignal, "retries">): boolean {
  return m.attempts > s.retries + 1;
}

/**
 * The failure of an attempt that never reported back, when it was the last one the budget allowed.
 * A durable consumer's run ends with the same record, so its message and run say the same.
 */
export function leaseExpiredFailure(
  s: Pick<OnceSignal, "name" | "retries">,
  attempt: number,
): { code: typeof LEASE_EXPIRED; message: string } {
  return {
    code: LEASE_EXPIRED,
    message:
      `attempt ${attempt} of "${s.name}" did not finish within its lease: ` +
      `its handler ran past the lease (slow or hung), crashed, or lost its process, and all ${s.retries + 1} attempts are spent`,
  };
}

/**
 * The failure of a last attempt that never started: its claim's lease ran out while the message waited
 * in the instance's prefetch buffer for a worker slot. Code LEASE_EXPIRED like any lapsed last attempt
 * (what dead-letter filters match on); the text says the handler never ran, so nobody hunts a crash.
 */
export function unstartedFailure(
  s: Pick<OnceSignal, "name" | "retries">,
  attempt: number,
  leaseMs: number,
): { code: typeof LEASE_EXPIRED; message: string } {
  return {
    code: LEASE_EXPIRED,
    message:
      `attempt ${attempt} of "${s.name}" never started: its lease (${leaseSeconds(leaseMs)}) ran out while it ` +
      `waited in this instance's buffer for a worker slot, and all ${s.retries + 1} attempts are spent`,
  };
}

/** Dead (or delivered without a dead letter) with a LEASE_EXPIRED failure for the attempt that never finished. */
export function spentSettlement(
  m: ClaimedMessage,
  s: Pick<OnceSignal, "name" | "retries" | "deadLetter">,
  worker: string,
  now: number,
): Settlement {
  const attempt = m.attempts - 1;
  return {
    id: m.id,
    worker,
    attempt: m.attempts,
    status: s.deadLetter ? "dead" : "delivered",
    failure: { ...leaseExpiredFailure(s, attempt), at: now, attempt },
  };
}
