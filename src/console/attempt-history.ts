/** A once message's attempts as operators read them: its failures split into deliveries at each replay, and the attempts whose lease lapsed with no outcome recorded. */
import { leaseSeconds } from "../signal/attempt-budget.ts";
import type { FailureReason, StoredMessage } from "../store/types.ts";

/** One attempt in a message's history: a recorded failure, or an attempt whose lease lapsed unrecorded. */
export type AttemptEntry =
  | (FailureReason & {
      outcome: "failed";
      /** 0: the delivery as emitted; n: the delivery after replay n (as far as the history tells them apart). */
      delivery: number;
    })
  | {
      outcome: "lapsed";
      delivery: number;
      attempt: number;
      /** What that means, in words (the page and `oke dead` print it as it is). */
      message: string;
    };

export interface AttemptHistory {
  /** Attempt numbers of the current delivery that lapsed unrecorded and were claimed again, ascending. */
  lapsed: number[];
  /** Every failure, in order, with the lapsed attempts of each delivery placed among them by number. */
  history: AttemptEntry[];
}

/** The words for a lapsed attempt: what happened to it, and the attempt that claimed the message next. */
export function lapsedText(attempt: number, leaseMs: number | undefined): string {
  const lease = leaseMs === undefined ? "" : ` (${leaseSeconds(leaseMs)})`;
  return (
    `no outcome recorded — its lease${lease} lapsed before it settled (handler crashed, hung or ran past the lease, ` +
    `its process died, or it never left the prefetch buffer); reclaimed as attempt ${attempt + 1}`
  );
}

const lapsedEntry = (delivery: number, attempt: number, leaseMs: number | undefined): AttemptEntry => ({
  outcome: "lapsed",
  delivery,
  attempt,
  message: lapsedText(attempt, leaseMs),
});

type Message = Pick<StoredMessage, "status" | "attempts" | "failures" | "replays">;

/**
 * The delivery of each failure, in order: a failure whose attempt number does not go up begins the
 * next one (a replay restarts the numbers), at most `replays` times (no bound when it is unknown).
 */
export function deliveriesOf(
  failures: readonly Pick<FailureReason, "attempt">[],
  replays: number | undefined,
): number[] {
  const out: number[] = [];
  let found = 0;
  failures.forEach((f, i) => {
    if (i > 0 && f.attempt <= failures[i - 1]!.attempt && (replays === undefined || found < replays)) found++;
    out.push(found);
  });
  return out;
}

/**
 * Derives `m`'s attempt history. Attempt numbers count from 1 in each delivery (a replay resets them)
 * while failures append to one list, so a failure whose attempt number does not go up begins the next
 * delivery — at most `replays` such restarts, the rule `oke dead` drew its replay lines with before.
 *
 * Every attempt of the current delivery below `attempts` was claimed and then claimed again; one with
 * no failure record did not settle (a settle at attempt k is fenced by k, and a delivered message is
 * claimed no more), so its lease lapsed first. `attempts` itself is the attempt in flight, the one
 * that settled, or — past the budget — the claim that found it spent, which runs no handler and whose
 * LEASE_EXPIRED failure names the attempt before it: never reported as lapsed. An earlier delivery
 * ended dead with its last failure recorded, so its lapsed attempts are the numbers below that one
 * with no record.
 *
 * When the restarts found are fewer than `replays`, a delivery's first failure had a higher number
 * than the last of the one before (retries raised, or an early dead letter), or the current delivery
 * has recorded none yet: the failures after the last restart are the current delivery's when the
 * status says it recorded one (dead, or pending at the attempt of its last failure); otherwise it has
 * none, and its lapsed attempts are all those below `attempts`.
 */
export function attemptHistory(m: Message, leaseMs: number | undefined): AttemptHistory {
  const replays = m.replays ?? 0;
  const fs = m.failures;
  const deliveryOf = deliveriesOf(fs, replays);
  const found = deliveryOf.at(-1) ?? 0;
  const last = fs.at(-1);
  const lastIsCurrent =
    found === replays ||
    (last !== undefined &&
      (m.status === "dead" || (m.status === "pending" && last.attempt === m.attempts && m.attempts > 0)));
  const current = lastIsCurrent ? found : replays;
  // Attempt numbers reached by each delivery: an earlier one up to its last failure, the current one
  // up to (not counting) `attempts`.
  const lapsedOf = (d: number): number[] => {
    const recorded = new Set(fs.filter((_, i) => deliveryOf[i] === d).map((f) => f.attempt));
    const below =
      d === current
        ? m.attempts - 1
        : Math.max(0, ...fs.filter((_, i) => deliveryOf[i] === d).map((f) => f.attempt)) - 1;
    const out: number[] = [];
    for (let k = 1; k <= below; k++) if (!recorded.has(k)) out.push(k);
    return out;
  };
  const history: AttemptEntry[] = [];
  const deliveries = [...new Set([...deliveryOf, current])].sort((a, b) => a - b);
  for (const d of deliveries) {
    const lapsed = lapsedOf(d);
    // Each lapsed attempt goes before the first failure of its delivery with a higher number; the
    // failures keep the order they were recorded in.
    fs.forEach((f, i) => {
      if (deliveryOf[i] !== d) return;
      while (lapsed.length > 0 && lapsed[0]! < f.attempt)
        history.push(lapsedEntry(d, lapsed.shift()!, leaseMs));
      history.push({ ...f, outcome: "failed", delivery: d });
    });
    for (const k of lapsed) history.push(lapsedEntry(d, k, leaseMs));
  }
  return { lapsed: lapsedOf(current), history };
}
