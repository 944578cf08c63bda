/** Ending a failed durable run: status `compensating` while its undos run, then `failed`, also after a crash. */
import { JournalLeaseBusy } from "../errors.ts";
import type { AcquiredRun } from "../store/types.ts";
import { beginCompensationRetried, finishRetried } from "./journal-retry.ts";
import type { DurableDeps, UndoList } from "./types.ts";
import type { JournalSession } from "./session.ts";
import { journaledFailure, restoreFailure } from "./step-errors.ts";

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
  // The run keeps the error as the journal does (name, own fields, cause, an OkeError's status): a
  // parent whose fx.call reads this run's end from the store (the child ended on another instance)
  // rebuilds the same error its first attempt caught, and takes the same branch.
  const failure = stored ?? journaledFailure(error);
  const finalError = stored ? restoreFailure(stored) : error;
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
