// The lifecycle of durable runs in the log, at debug level (OKE_LOG_LEVEL=debug): start, wake, resume, park, finish.
import type { Logger } from "../log/logger.ts";
import type { AcquiredRun } from "../store/types.ts";
import type { DurableOutcome } from "./types.ts";

const iso = (ms: number): string => new Date(ms).toISOString();

/** Says how this attempt begins: a new run, a wake after a sleep, or a resume (crash, lease lapse, deploy). */
export function logRunBegins(logger: Logger, acquired: AcquiredRun): void {
  const { run, entries } = acquired;
  const at = { runId: run.id, flow: run.flow };
  const last = entries[entries.length - 1];
  if (entries.length === 0) logger.debug(at, `durable run ${run.id} (${run.flow}): started`);
  else if (last?.kind === "sleep")
    logger.debug(
      { ...at, label: last.label },
      `durable run ${run.id} (${run.flow}): woke from sleep "${last.label}", resuming after ${entries.length} journaled entries`,
    );
  else
    logger.debug(
      { ...at, entries: entries.length },
      `durable run ${run.id} (${run.flow}): resumed, replaying ${entries.length} journaled entries`,
    );
}

/** Says how this attempt ended. */
export function logRunOutcome(logger: Logger, acquired: AcquiredRun, outcome: DurableOutcome): void {
  const at = { runId: acquired.run.id, flow: acquired.run.flow };
  const name = `durable run ${at.runId} (${at.flow})`;
  if (outcome.kind === "parked" && outcome.blocked !== undefined)
    logger.debug(
      { ...at, retryAt: outcome.wakeAt },
      `${name}: held back (its journal does not match the code), tried again at ${iso(outcome.wakeAt)}`,
    );
  else if (outcome.kind === "parked")
    logger.debug({ ...at, wakeAt: outcome.wakeAt }, `${name}: parked until ${iso(outcome.wakeAt)}`);
  else if (outcome.kind === "completed") logger.debug(at, `${name}: finished, completed`);
  else if (outcome.retry) logger.debug(at, `${name}: attempt failed, released for a retry`);
  else logger.debug({ ...at, err: outcome.error }, `${name}: finished, failed`);
}
