/** driveRun: one attempt of a durable run this instance holds — heartbeat, park, finish, compensation. */
import { errorRecord, JournalLeaseBusy, OkeError } from "../errors.ts";
import type { AcquiredRun } from "../store/types.ts";
import { compensateAndFail } from "./compensation.ts";
import { logRunBegins, logRunOutcome } from "./run-log.ts";
import { journalValue } from "./journal-value.ts";
import { finishRetried, releaseRetried } from "./journal-retry.ts";
import { MISMATCH_RETRY_MS } from "./mismatch-log.ts";
import { JournalSession, PARKED, ReplayEnd } from "./session.ts";

// Shared with compensation.ts and run-log.ts, so they live in types.ts (no import back to this file).
export type { DurableDeps, DurableOutcome, UndoList } from "./types.ts";
import type { DurableDeps, DurableOutcome, UndoList } from "./types.ts";

/**
 * Drives one attempt of a durable run that this instance has acquired: keeps
 * its lease alive with a heartbeat, races the body against a park, and
 * records the terminal status. Never throws for the flow's own failure.
 */
export async function driveRun(
  deps: DurableDeps,
  acquired: AcquiredRun,
  execute: (session: JournalSession, undos: UndoList) => Promise<unknown>,
  options: DriveOptions = {},
): Promise<DurableOutcome> {
  logRunBegins(deps.logger, acquired);
  const outcome = await driveAttempt(deps, acquired, execute, options);
  logRunOutcome(deps.logger, acquired, outcome);
  return outcome;
}

async function driveAttempt(
  deps: DurableDeps,
  acquired: AcquiredRun,
  execute: (session: JournalSession, undos: UndoList) => Promise<unknown>,
  options: DriveOptions,
): Promise<DurableOutcome> {
  const runId = acquired.run.id;
  const owner = acquired.run.leaseOwner!;
  // A run that crashed while compensating only replays, then finishes its compensation.
  const compensating = acquired.run.status === "compensating";
  const ending = options.end;
  const retryable = !compensating && ending === undefined && (options.retryable ?? false);
  const session = new JournalSession(
    {
      store: deps.store,
      runId,
      owner,
      leaseMs: deps.leaseMs,
      now: () => deps.clock.now(),
      journalErrors: !retryable,
      replayOnly: compensating || ending !== undefined,
      retry: deps,
      leaseExpiresAt: acquired.run.leaseExpiresAt,
    },
    [...acquired.entries],
  );
  // Writes below go as session.owner, read when each is sent: a graceful stop may rename the lease.
  const stopHeartbeat = heartbeat(deps, runId, session);
  const undos: UndoList = [];
  try {
    // An attempt that begins late — its start or claim answered with less than half its lease left
    // (queued behind other statements, a stalled event loop) — may have lost the run meanwhile to an
    // instance that ran and journaled steps this journal lacks. The lease is confirmed (a fenced
    // renewal) before any code of the flow runs, as before each step; refused, the attempt ends here
    // (JournalLeaseBusy).
    await session.ensureLease();
    const value = await execute(session, undos);
    // The body caught an OKE1301 and ended anyway: still the deploy's, not the run's (held back below).
    if (session.mismatch !== undefined) throw session.mismatch;
    if (compensating) throw new ReplayEnd(runId);
    if (value === PARKED) return { kind: "parked", runId, wakeAt: session.wakeAt! };
    // Returned before effects its journal holds (the sleep it was parked on removed): not completed.
    const early = session.endedEarly("returns before it");
    if (early !== undefined) throw early;
    // Effects the body left running (a missing await) are journaled before the run ends.
    await session.settleBeside("the flow's return");
    const output = parseJson(journalValue(value, `the output of run "${runId}" (${acquired.run.flow})`));
    await finishRetried(deps, runId, session.owner, session, "completed", { output });
    return { kind: "completed", runId, value };
  } catch (error) {
    if (error instanceof JournalLeaseBusy) {
      deps.logger.warn({ runId }, error.message);
      throw error;
    }
    await session.settleBeside("the flow's failure");
    // A mismatch the body caught and answered with a failure of its own is held back as well: that
    // failure came from code that does not match the journal, and failing would run its undos.
    // So is a failure the replay met before the end of the journal: the code that wrote it went on.
    const mismatch =
      session.mismatch ??
      (isJournalMismatch(error) ? error : undefined) ??
      (error instanceof ReplayEnd ? undefined : session.endedEarly(`fails before it: ${describe(error)}`));
    if (mismatch !== undefined) return blocked(deps, acquired, session.owner, mismatch, session);
    // Ended at the end of its journal: fail with the reason given; a failure the replay itself
    // reached (a journaled step error the body does not catch) is the run's own and stays.
    if (ending !== undefined && error instanceof ReplayEnd) {
      const failed = await compensateAndFail(
        deps,
        acquired,
        session.owner,
        session,
        undos,
        new OkeError(ending),
      );
      return { kind: "failed", runId, error: failed, retry: false };
    }
    if (retryable) {
      // Another attempt will replay the journal and retry the failed step; the run is not over.
      await releaseRetried(deps, runId, session.owner, { lost: () => session.lostLease });
      return { kind: "failed", runId, error, retry: true };
    }
    const failed = await compensateAndFail(deps, acquired, session.owner, session, undos, error);
    return { kind: "failed", runId, error: failed, retry: false };
  } finally {
    stopHeartbeat();
  }
}

/** OKE1301: the journal holds another step (kind or name) at a position than the code asks for. */
const isJournalMismatch = (e: unknown): e is OkeError => e instanceof OkeError && e.code === "OKE1301";

/**
 * A journal that no longer matches the code is not the run's failure but the deploy's: the code
 * changed under a live run (a step inserted, renamed or removed before its position), or, during a
 * rolling deploy, an instance still on the other version took it. Failing it was final and ran its
 * undos — the new code's undos, over the old code's journal — so a deploy refunded healthy orders.
 * Instead the run is released, untouched, to be tried again in MISMATCH_RETRY_MS by any instance:
 * once every instance runs the code that wrote its journal (the deploy finished, or was reverted)
 * it goes on. Reported as parked until then (a consumer's message settles as for a sleep, a caller
 * gets `undefined`): the run lives on its own in the store, like a sleeper.
 */
async function blocked(
  deps: DurableDeps,
  acquired: AcquiredRun,
  owner: string,
  error: OkeError,
  session: JournalSession,
): Promise<DurableOutcome> {
  const runId = acquired.run.id;
  const retryAt = deps.clock.now() + MISMATCH_RETRY_MS;
  await releaseRetried(deps, runId, owner, {
    retryAt,
    lost: () => session.lostLease,
    hold: { code: error.code, message: error.message },
  });
  deps.mismatches.report(acquired.run, error, retryAt);
  return { kind: "parked", runId, wakeAt: retryAt, blocked: error };
}

export interface DriveOptions {
  /** A failing step is not journaled and the run is released, not failed: its trigger retries. */
  retryable?: boolean;
  /**
   * End the run from its journal without new work: the body only replays (no step, call, send or
   * emit runs again); at the end of the journal the run fails with this error, its compensation
   * run first. A journal that holds the whole body completes the run. For a durable consumer whose
   * message spent its attempts while the run's holder was gone.
   */
  end?: { code: string; message: string };
}

/**
 * Renews the lease every third of leaseMs on the app's clock, so a long step
 * is never picked up elsewhere. The next beat is armed when this one fires,
 * not when its write returns, so a slow store never lets beats drift late.
 */
function heartbeat(deps: DurableDeps, runId: string, session: JournalSession): () => void {
  let cancel: (() => void) | undefined;
  let stopped = false;
  let renewing = false;
  let again = false;
  const every = Math.max(1, Math.floor(deps.leaseMs / 3));
  // Every beat renews: one that comes while a renewal is in flight runs right after it.
  const renew = (): void => {
    if (renewing) {
      again = true;
      return;
    }
    renewing = true;
    const at = deps.clock.now();
    const owner = session.owner;
    deps.store
      .renewLease({ runId, owner, now: at, leaseMs: deps.leaseMs })
      .then(() => session.leaseRenewed(at))
      .catch((e: unknown) => {
        if (stopped) return;
        // Sent under the name a graceful stop replaced meanwhile (leftToLease): the next beat renews.
        if (e instanceof JournalLeaseBusy && session.owner !== owner) return;
        if (e instanceof JournalLeaseBusy) {
          session.markLost(e);
          stopped = true;
          cancel?.();
        } else
          deps.logger.warn({ runId, err: e }, "durable run: lease renewal failed; the next beat retries");
      })
      .finally(() => {
        renewing = false;
        if (again && !stopped) {
          again = false;
          renew();
        }
      });
  };
  const beat = (at: number): void => {
    if (stopped) return;
    cancel = deps.clock.at(at, () => {
      // Beats missed while the clock jumped (time travel, a stalled event loop) are not replayed.
      const now = deps.clock.now();
      beat(at + every > now ? at + every : now + every);
      renew();
    });
  };
  beat(deps.clock.now() + every);
  return () => {
    stopped = true;
    cancel?.();
  };
}

/** An error as the hold message quotes it: code (or name) and message, storable, cut at 300 characters. */
const describe = (e: unknown): string => {
  const { code, message } = errorRecord(e);
  const text = `${code}: ${message}`;
  // By code point: a cut between two halves of a surrogate pair would leave one PostgreSQL refuses.
  return text.length > 300 ? `${[...text].slice(0, 299).join("")}…` : text;
};

const parseJson = (text: string | undefined): unknown => (text === undefined ? undefined : JSON.parse(text));
