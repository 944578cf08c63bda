/** An operator's terminate of a durable run: the error it ends with, and its consumed message made a dead letter so a replay can run the work afresh. */
import type { Logger } from "../log/logger.ts";
import { replayOf } from "../store/resettle-rules.ts";
import type { RunRecord, Store, StoredMessage } from "../store/types.ts";

/** OKE1339: the error a run an operator terminated ends with. */
export const TERMINATED = "OKE1339";

/** The run's error after a terminate: who, when, and why when they said. */
export const terminatedError = (
  actor: string,
  at: number,
  reason: string | undefined,
): { code: string; message: string } => ({
  code: TERMINATED,
  message: `terminated by ${actor} at ${new Date(at).toISOString()}${reason === undefined ? "" : `: ${reason}`}`,
});

/** What a terminate did to the message a durable consumer's run was working. */
export interface TerminatedMessage {
  id: string;
  signal: string;
  /**
   * `dead`: it was delivered (the run had parked) and is now a dead letter, replayable; `delivered`:
   * the same for a signal with `deadLetter: false` (kept delivered, with the failure); `pending` or
   * `inflight`: its next claim finds the run terminated and dead-letters it at once; `dead-already`:
   * nothing to do; `unchanged`: it was claimed or settled otherwise meanwhile, or the store cannot
   * settle it again.
   */
  outcome: "dead" | "delivered" | "pending" | "inflight" | "dead-already" | "unchanged";
}

/**
 * After a terminate, the message of a durable consumer's run. A run that parked had its message
 * settled `delivered` at the park, and nothing resumes a terminated run to settle it again: without
 * this the work would be gone with no dead letter to replay. It is settled `dead` with the run's
 * error (as a run ended past durable.maxRecoveries is), fenced like the runtime's own resettle.
 * `deadLetter(signal)`: the signal's declared deadLetter, when this app declares it. Undefined when
 * the run consumed no message (an invoke, a call, a route).
 */
export async function settleTerminatedMessage(
  store: Store,
  run: Pick<RunRecord, "id" | "flow" | "error">,
  now: number,
  deadLetter: (signal: string) => boolean | undefined,
  logger: Logger,
): Promise<TerminatedMessage | undefined> {
  const { messageId, replays } = replayOf(run.id);
  // A run's id is its message's (or `<id>.r<n>` for replay n) only for a durable consumer: any other
  // run's id is generated, never a message's.
  const m: StoredMessage | undefined = await store.getMessage(messageId);
  if (m === undefined || (m.replays ?? 0) !== replays) return undefined;
  const out = (outcome: TerminatedMessage["outcome"]): TerminatedMessage => ({
    id: m.id,
    signal: m.signal,
    outcome,
  });
  if (m.status === "dead") return out("dead-already");
  if (m.status !== "delivered") return out(m.status);
  if (store.resettleDelivered === undefined) return out("unchanged");
  const status = deadLetter(m.signal) === false ? "delivered" : "dead";
  const error = run.error ?? { code: TERMINATED, message: "terminated" };
  const done = await store.resettleDelivered(
    {
      message: { id: m.id, signal: m.signal, key: m.key, payload: m.payload, parentRunId: m.parentRunId },
      ...(m.replays === undefined ? {} : { replays: m.replays }),
      attempts: m.attempts,
      status,
      failure: { code: error.code, message: error.message, at: now, attempt: m.attempts },
    },
    now,
  );
  if (!done) {
    logger.warn(
      { runId: run.id, flow: run.flow, messageId: m.id, signal: m.signal },
      "terminate: the run's message was claimed or settled otherwise meanwhile; left as it is",
    );
    return out("unchanged");
  }
  return out(status);
}
