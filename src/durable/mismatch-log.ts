/** Runs held back by a deploy: the log of those whose journal no longer matches their flow's code (OKE1301), and the advice for each reason. */
import type { Logger } from "../log/logger.ts";
import type { OkeError } from "../errors.ts";
import type { RunRecord } from "../store/types.ts";

/** How long a run whose journal no longer matches its flow's code waits before it is tried again. */
export const MISMATCH_RETRY_MS = 30_000;

/**
 * What happens to a held-back run and what an operator does about it: the same words in the log line,
 * the Console (API and page) and the CLI.
 */
export const MISMATCH_FIX =
  `It is tried again every ${MISMATCH_RETRY_MS / 1000} s and goes on once an instance runs the code that wrote its journal: ` +
  "finish the rolling deploy, or revert the change to the flow (steps, sleeps, emits and ids before a run's position must keep their order and names). " +
  "If the change is meant to stay, end such runs with `oke terminate <id>` (their undos do not run).";

/** How long a run taken by an instance whose app lacks its flow waits before it is tried again. */
export const UNKNOWN_FLOW_RETRY_MS = 5_000;

/** The code of RunRecord.held for a run given back because the instance that took it lacks its flow. */
export const UNKNOWN_FLOW = "OKE1307";

/** The reason kept with such a run: it names the flow and the instance that lacked it. */
export const unknownFlowHold = (
  run: Pick<RunRecord, "id" | "flow">,
  instanceId: string,
): { code: string; message: string } => ({
  code: UNKNOWN_FLOW,
  message: `durable run "${run.id}": flow "${run.flow}" is not in the app of instance ${instanceId}, which took it; left for an instance that has it`,
});

/** What happens to a run held back with UNKNOWN_FLOW and what an operator does about it. */
export const UNKNOWN_FLOW_FIX =
  `It is tried again every ${UNKNOWN_FLOW_RETRY_MS / 1000} s and goes on once an instance whose app defines the flow takes it: ` +
  "finish the rolling deploy (oke status lists flows no live instance serves). If the flow was removed on purpose, end the run with oke terminate <run id> (its undos do not run).";

/** What to do about a run held back for `code`; null for a reason with no advice. */
export const holdFix = (code: string): string | null =>
  code === "OKE1301" ? MISMATCH_FIX : code === UNKNOWN_FLOW ? UNKNOWN_FLOW_FIX : null;

/** How many blocked runs one instance remembers having reported (then it starts over). */
const REMEMBERED = 10_000;

/**
 * A blocked run is tried again every MISMATCH_RETRY_MS until the code matches its journal. Its first
 * block in this process is an error line with the mismatch and what to do; the tries after it are
 * debug lines, so a deploy that blocks a thousand runs writes a thousand errors once, not every 30 s.
 */
export class MismatchLog {
  private readonly reported = new Set<string>();

  constructor(private readonly logger: Logger) {}

  report(run: Pick<RunRecord, "id" | "flow">, error: OkeError, retryAt: number): void {
    const at = { runId: run.id, flow: run.flow, code: error.code, retryAt: new Date(retryAt).toISOString() };
    if (this.reported.has(run.id)) {
      this.logger.debug(
        at,
        `durable run "${run.id}" (${run.flow}) still does not match its journal; tried again later`,
      );
      return;
    }
    if (this.reported.size >= REMEMBERED) this.reported.clear();
    this.reported.add(run.id);
    this.logger.error(
      { ...at, err: error },
      `durable run "${run.id}" (${run.flow}) held back, not failed: ${error.message}. ${MISMATCH_FIX}`,
    );
  }
}
