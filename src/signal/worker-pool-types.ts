/** The worker pool's public shapes: a handler's outcome, the pool's options, a claim-at-emit slot reservation. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import type { ClaimedMessage, FailureReason, Store } from "../store/types.ts";
import type { OnceSignal } from "./signal.ts";

/**
 * What running one claimed message came to. `abandon` leaves it inflight for lazy reclaim (another
 * holder has its run, `runId`, leased: JournalLeaseBusy); the pool logs it. An error
 * that is `final` is not retried whatever attempts are left (a durable consumer's run that ended for
 * good: every redelivery would only read its failure again).
 */
export type HandlerOutcome =
  | { kind: "ok" }
  | {
      kind: "error";
      failure: Omit<FailureReason, "at" | "attempt">;
      final?: boolean;
      /** The thrown value, for the log line alone (its stack says where the handler threw); never stored. */
      cause?: unknown;
      /**
       * The attempt the failure belongs to, when not this claim's: a spent claim settling the attempt
       * before it, which was cut off (its failure names that attempt, as a lapsed last attempt's does).
       */
      attempt?: number;
      /** The handler's runtime logged the failure in its own words: the pool adds no line of its own. */
      logged?: boolean;
    }
  | { kind: "abandon"; runId?: string };

export interface WorkerPoolOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  signal: OnceSignal;
  /** Holder id stamped into lockedBy. */
  worker: string;
  concurrency: number;
  /**
   * Messages claimed ahead of free slots and kept locally, so one claim round
   * trip feeds many handlers. A buffered message whose lease ran out before a
   * slot freed up is dropped (logged; it will be reclaimed), never run late.
   */
  prefetch: number;
  leaseMs: number;
  /**
   * Settle hand-off (Store.settle's SettleHandoff): a keyed message that settles
   * for good claims its key's next message in the settle statement. Off by
   * default: on PostgreSQL it halves the statements of a keyed drain (1 000 keys
   * × 50: 0.015 → 0.007 per job) but, measured interleaved on the shared 2-core
   * box, the drain took 10-11.5 s instead of 5-6 s: the settle with hand-off
   * cost ~40 ms per ~125 rows against ~8 ms per settle plus ~17 ms per claim
   * of ~230 rows (bench/pg-costs.ts s5, bench/README.md).
   */
  handoff?: boolean;
  handle(message: ClaimedMessage): Promise<HandlerOutcome>;
  /**
   * Asked when a claim finds the attempt budget spent, before the message is dead-lettered with
   * LEASE_EXPIRED: an outcome settles it like a handler's (a durable consumer's run decides), and
   * `undefined` keeps the LEASE_EXPIRED settlement. With `unstarted`, asked instead for a message
   * dropped from the buffer with its last attempt (this claim, never run): a run an earlier attempt
   * started decides as above, and one to end is ended with `unstarted` (the never-started failure);
   * `undefined` (no run) settles the message with that failure.
   */
  whenSpent?(
    message: ClaimedMessage,
    unstarted?: { code: string; message: string },
  ): Promise<HandlerOutcome | undefined>;
  /**
   * What `whenSpent` does, for the warning about a handler still running past its lease, when it is
   * not a durable consumer's run lookup (whose wording is the default): a broadcast copy is settled
   * unrun, and "settles it with its run" would send an operator looking for a run that never exists.
   */
  whenSpentSays?: string;
  /**
   * What a stop does with handlers still running at its deadline. `"same attempt"` (default): marks
   * their claims as a graceful stop's (Store.leaveClaimsToLease), so the claim after the lapse runs
   * them as the same attempt — a deploy does not spend a once message's retries. `"spent"`: leaves
   * them unmarked, so the claim after the lapse counts the attempt as a crash's would; a broadcast
   * copy (one attempt, never run twice) is then settled as cut off rather than run again.
   */
  cutAtStop?: "same attempt" | "spent";
}

/** A slot held for a message being written already claimed (claim at emit). */
export interface SlotReservation {
  /** The write committed: run the message in the held slot. */
  start(message: ClaimedMessage): void;
  /** The write failed: give the slot back. */
  release(): void;
}
