/** Ending a failed durable run: status `compensating` while its undos run, then `failed`, also after a crash. */
import { JournalLeaseBusy } from "../errors.ts";
import type { AcquiredRun } from "../store/types.ts";
import { beginCompensationRetried, finishRetried } from "./journal-retry.ts";
import type { DurableDeps, UndoList } from "./types.ts";
import { errorRecord, type JournalSession, StepError } from "./session.ts";

/**
 * Runs the registered undos (status `compensating` meanwhile, so a crash
 * leaves a run another instance finishes) and records `failed` with the
 * original error. A resumed compensating run keeps the error stored when its
 * compensation began. Returns the error the run failed with.
 */
export async function compensateAndFail(
  deps: DurableDeps,
  acquired: AcquiredRun,
  owner: string,
  session: JournalSession,
  undos: UndoList,
  error: unknown,
): Promise<unknown> {
  const runId = acquired.run.id;
  const resumed = acquired.run.status === "compensating";
  const stored = resumed ? acquired.run.error : undefined;
  const failure = stored ?? errorRecord(error);
  const finalError = stored ? new StepError(stored.code, stored.message) : error;
  try {
    if (!resumed && undos.length > 0) await beginCompensationRetried(deps, runId, owner, session, failure);
    await session.compensate(undos);
    await finishRetried(deps, runId, owner, session, "failed", { error: failure });
  } catch (e) {
    if (e instanceof JournalLeaseBusy) throw e;
    deps.logger.error({ runId, err: e }, "durable run: could not record failure");
    throw e;
  }
  return finalError;
}
