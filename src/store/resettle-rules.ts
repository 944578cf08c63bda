/** Rules every driver shares for QueueStore.resettleDelivered: its fence and its idempotent retry. */
import type { FailureReason, ResettleDelivered } from "./types.ts";

/** The fields of a stored message the rule reads. */
export interface ResettleState {
  status: string;
  attempts: number;
  failures: readonly FailureReason[];
}

const sameFailure = (a: FailureReason | undefined, b: FailureReason): boolean =>
  a !== undefined && a.code === b.code && a.message === b.message && a.at === b.at && a.attempt === b.attempt;

/**
 * Where a message stands for resettleDelivered `r`: `open` — still `delivered` with `r.attempts`,
 * so it is settled as asked; `already` — a retry of that call finds it done (reported, nothing
 * written); `gone` — claimed, replayed or settled otherwise since: left alone. An absent message
 * (pruned) is the caller's to recreate.
 */
export function resettleState(m: ResettleState, r: ResettleDelivered): "open" | "already" | "gone" {
  if (m.attempts !== r.attempts) return "gone";
  const done = sameFailure(m.failures.at(-1), r.failure);
  if (done) return m.status === r.status ? "already" : "gone";
  return m.status === "delivered" ? "open" : "gone";
}

/**
 * The id of the run a durable consumer's delivery of message `m` uses after `m.replays` operator
 * replays (`<id>.r<n>`; the message's own id before any). With `m.id` itself, the runs pruneDelivered
 * looks at: a delivered message whose run is unfinished (parked) is kept, as the run may still fail.
 */
export const consumerRunId = (m: { id: string; replays?: number }): string =>
  (m.replays ?? 0) > 0 ? `${m.id}.r${m.replays}` : m.id;

/** consumerRunId's inverse: a consumer run id's message id and replay number (0: the message's own run). Ids are [0-9a-z]. */
export function replayOf(runId: string): { messageId: string; replays: number } {
  const at = /\.r([1-9][0-9]*)$/.exec(runId);
  return at
    ? { messageId: runId.slice(0, at.index), replays: Number(at[1]) }
    : { messageId: runId, replays: 0 };
}
