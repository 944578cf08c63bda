import { driveRun, type DurableDeps } from "../durable/runner.ts";
import { errorRecord } from "../durable/session.ts";
import { JournalLeaseBusy } from "../errors.ts";
import type { AnyFlow } from "../flow/flow.ts";
import type { HandlerOutcome } from "../signal/worker-pool.ts";
import type { OnceSignal } from "../signal/signal.ts";
import type { ClaimedMessage } from "../store/types.ts";
import { executeFlow } from "./execute.ts";
import type { Runtime } from "./runtime.ts";

/**
 * Runs one claimed message through its flow. A durable consumer's run id is
 * the message id, so a redelivered message resumes the same run and its
 * completed steps never run again.
 */
export function onceHandler(rt: Runtime, signal: OnceSignal, flow: AnyFlow, durable: DurableDeps) {
  return async (m: ClaimedMessage): Promise<HandlerOutcome> => {
    try {
      if (!flow.durable) {
        await executeFlow(rt, flow, m.payload, {
          runId: m.id,
          attempt: m.attempts,
          parentRunId: m.parentRunId,
        });
        return { kind: "ok" };
      }
      const existing = await rt.store.getRun(m.id);
      if (existing?.status === "completed") return { kind: "ok" };
      if (existing?.status === "failed")
        return { kind: "error", failure: existing.error ?? { code: "Error", message: "run failed" } };
      // Parked: the wake scheduler owns it now; the message's job is done.
      if (existing?.status === "sleeping" && (existing.wakeAt ?? 0) > rt.clock.now()) return { kind: "ok" };
      const acquired = await rt.store.startRun({
        id: m.id,
        flow: flow.name!,
        input: m.payload,
        parentRunId: m.parentRunId,
        owner: durable.nextOwner(),
        now: rt.clock.now(),
        leaseMs: durable.leaseMs,
      });
      const outcome = await driveRun(
        durable,
        acquired,
        (session, undos) =>
          executeFlow(rt, flow, acquired.run.input, {
            runId: m.id,
            attempt: m.attempts,
            parentRunId: m.parentRunId,
            session,
            undos,
          }),
        { retryable: m.attempts <= signal.retries },
      );
      if (outcome.kind === "failed") return { kind: "error", failure: errorRecord(outcome.error) };
      return { kind: "ok" };
    } catch (e) {
      // Another instance holds the run: leave the message to its lease.
      if (e instanceof JournalLeaseBusy) return { kind: "abandon" };
      return { kind: "error", failure: errorRecord(e) };
    }
  };
}
