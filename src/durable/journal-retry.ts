/** Retries a fenced journal write (append, park, finish, begin compensation, release) through a transient store failure, with backoff, like settles. */
import type { Clock } from "../clock/clock.ts";
import { JournalLeaseBusy, OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import { retryAfterFailure } from "../store/commit-retry.ts";
import type { Store } from "../store/types.ts";

export interface JournalRetryDeps {
  clock: Clock;
  logger: Logger;
  leaseMs: number;
  /** Aborted at the stop deadline: the write is given up and the run left to its lease. */
  abort?: AbortSignal | undefined;
}

/**
 * PostgreSQL errors no retry can change: data exceptions (class 22, e.g. a bigint out of range),
 * integrity violations (23) and syntax or access errors (42). Retried, they held a run for a whole
 * lease, then came back at each recovery until durable.maxRecoveries.
 */
const DETERMINISTIC_SQLSTATE = /^(22|23|42)[0-9A-Z]{3}$/;

/**
 * A store's refusals (lease busy, duplicate seq, terminal run, bad input) are
 * answers, never retried; so are programming errors — a TypeError or RangeError
 * (better-sqlite3 refusing to bind a value, a value out of range), which the same
 * write meets again on every try. Anything else — a dropped connection, a full
 * disk, an outage wrapped in an OkeError's cause — may pass, so it is retried.
 */
export function isTransient(e: unknown): boolean {
  if (e instanceof JournalLeaseBusy) return false;
  if (e instanceof TypeError || e instanceof RangeError) return false;
  if (e instanceof OkeError) return e.cause !== undefined;
  const code = (e as { code?: unknown } | null)?.code;
  return !(typeof code === "string" && DETERMINISTIC_SQLSTATE.test(code));
}

/**
 * Runs `write` until it commits. Safe because journal writes are fenced by
 * the lease owner and append is idempotent (a retry of an append that
 * committed writes nothing more), and `write` is told the attempt so a finish
 * can first check whether its first try landed. Gives up — logged, thrown as
 * JournalLeaseBusy so the run is left to its lease and resumes from its
 * journal — when the lease is lost, after a whole lease of failures (another
 * instance may have taken the run), or at the stop deadline.
 */
export async function retryJournalWrite<T>(
  deps: JournalRetryDeps,
  what: string,
  runId: string,
  write: (attempt: number) => Promise<T>,
  lost: () => JournalLeaseBusy | undefined = () => undefined,
): Promise<T> {
  const started = deps.clock.now();
  // The first try outside the retry loop: nearly every write commits at once, and the loop's
  // closures and promise layers were ~7 % of a durable run's Node CPU (--cpu-prof, S9 one at a time);
  // bench/s9-ab.ts, two interleaved runs of 10 rounds: Node CPU per run 1.32 -> 1.11 and 1.36 -> 1.30 ms.
  let first: { error: unknown };
  try {
    return await write(1);
  } catch (e) {
    if (!isTransient(e)) throw e;
    first = { error: e };
  }
  const r = await retryAfterFailure(write, isTransient, {
    firstFailure: first,
    ...(deps.abort ? { signal: deps.abort } : {}),
    giveUp: () =>
      lost() !== undefined
        ? "the lease was lost"
        : deps.clock.now() - started >= deps.leaseMs
          ? "its lease ran out"
          : undefined,
    onRetry: (err, n, delayMs) =>
      deps.logger.warn(
        { err, runId, attempt: n, retryInMs: delayMs },
        `durable run: ${what} failed; retrying`,
      ),
  });
  if (r.ok) return r.value;
  deps.logger.error(
    { err: r.error, runId, reason: r.reason, attempts: r.attempts },
    `durable run: ${what} given up (${r.reason}); the run resumes from its journal once its lease runs out`,
  );
  throw lost() ?? new JournalLeaseBusy(runId);
}

/**
 * finish, retried through transient store failures. A retry first looks
 * whether the previous try landed (its reply may have been lost): a run
 * already in that terminal status is done.
 */
export function finishRetried(
  deps: JournalRetryDeps & { store: Store },
  runId: string,
  owner: string,
  session: { readonly lostLease: JournalLeaseBusy | undefined },
  status: "completed" | "failed",
  result: { output?: unknown; error?: { code: string; message: string } },
): Promise<void> {
  return retryJournalWrite(
    deps,
    "finish",
    runId,
    async (attempt) => {
      if (attempt > 1 && (await deps.store.getRun(runId))?.status === status) return;
      await deps.store.finish({ runId, owner, now: deps.clock.now(), status, ...result });
    },
    () => session.lostLease,
  );
}

/**
 * beginCompensation, retried through transient store failures. A retry first
 * looks whether the previous try landed: the run already compensating under
 * this owner's lease is done (the retry itself would be refused, the run
 * being no longer `running`).
 */
export function beginCompensationRetried(
  deps: JournalRetryDeps & { store: Store },
  runId: string,
  owner: string,
  session: { readonly lostLease: JournalLeaseBusy | undefined },
  error: { code: string; message: string },
): Promise<void> {
  return retryJournalWrite(
    deps,
    "begin compensation",
    runId,
    async (attempt) => {
      if (attempt > 1) {
        const run = await deps.store.getRun(runId);
        if (run?.status === "compensating" && run.leaseOwner === owner) return;
      }
      await deps.store.beginCompensation({ runId, owner, now: deps.clock.now(), error });
    },
    () => session.lostLease,
  );
}

/**
 * releaseRun, retried through transient store failures. No check is needed:
 * a release by a caller that no longer holds the run changes nothing on every
 * driver, so a retry of a release that landed (or of one whose run another
 * instance took since) is a no-op.
 */
export function releaseRetried(
  deps: JournalRetryDeps & { store: Store },
  runId: string,
  owner: string,
  options: {
    retryAt?: number;
    lost?: () => JournalLeaseBusy | undefined;
    /** Why, for operators (ReleaseRequest.hold): shown with the run while it waits. */
    hold?: { code: string; message: string };
  } = {},
): Promise<void> {
  return retryJournalWrite(
    deps,
    "release",
    runId,
    () =>
      deps.store.releaseRun({
        runId,
        owner,
        now: deps.clock.now(),
        ...(options.retryAt === undefined ? {} : { retryAt: options.retryAt }),
        ...(options.hold === undefined ? {} : { hold: options.hold }),
      }),
    options.lost,
  );
}
