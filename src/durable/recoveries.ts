/** The bound on a durable run's recoveries (`durable.maxRecoveries`): the failure a poison run ends with. */
import type { RunRecord } from "../store/types.ts";

/** The code of a run ended because it was recovered more often than `durable.maxRecoveries` allows. */
export const RECOVERIES_EXCEEDED = "OKE1303";

/**
 * The failure of a run past the bound: its holder died or hung past its lease more often than
 * `maxRecoveries` allows (a poison run: a step that kills or wedges every process that runs it).
 * Undefined while the run is within it.
 */
export function recoveriesExceeded(
  run: Pick<RunRecord, "id" | "flow" | "recoveries">,
  maxRecoveries: number,
): { code: typeof RECOVERIES_EXCEEDED; message: string } | undefined {
  if (run.recoveries <= maxRecoveries) return undefined;
  return {
    code: RECOVERIES_EXCEEDED,
    message:
      `journal: run "${run.id}" (${run.flow}) was recovered ${run.recoveries} times, ` +
      `more than durable.maxRecoveries (${maxRecoveries}); ended without running again`,
  };
}
