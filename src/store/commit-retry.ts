/** Retries a fenced store write with backoff until it commits or the caller gives up; safe because the store fences stale writers. */
import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";

export interface CommitRetryOptions {
  /** Checked before every retry: a reason to stop, or undefined to go on. */
  giveUp(): string | undefined;
  /** Told about each failure that will be retried. */
  onRetry(err: unknown, attempt: number, delayMs: number): void;
  /** Aborts the wait between two tries (the caller is stopping). */
  signal?: AbortSignal;
  minDelayMs?: number;
  maxDelayMs?: number;
  /** The first try was made by the caller and failed with this: go on from its failure. */
  firstFailure?: { error: unknown };
}

export type CommitResult<T> = { ok: true; value: T } | { ok: false; error: unknown; reason: string };

/**
 * Only for writes the store fences (settle by holder and attempt, journal
 * writes by lease owner): a retry after a failure whose outcome is unknown
 * either applies once or is refused as stale, never applies twice.
 */
export async function commitWithRetry<T>(
  write: () => Promise<T>,
  o: CommitRetryOptions,
): Promise<CommitResult<T>> {
  let delay = o.minDelayMs ?? 50;
  const max = o.maxDelayMs ?? 2_000;
  for (let attempt = 1; ; attempt++) {
    try {
      if (attempt === 1 && o.firstFailure !== undefined) throw o.firstFailure.error;
      return { ok: true, value: await write() };
    } catch (error) {
      const reason = o.signal?.aborted ? "stopping" : o.giveUp();
      if (reason !== undefined) return { ok: false, error, reason };
      o.onRetry(error, attempt, delay);
      try {
        await sleep(delay, undefined, { signal: o.signal, ref: false });
      } catch {
        return { ok: false, error, reason: "stopping" };
      }
      delay = Math.min(delay * 2, max);
    }
  }
}

/**
 * The retries of a write whose first try (`o.firstFailure`) failed, when not every failure is worth
 * a retry: an error `retryable` refuses is thrown as it is. `write` is told the try (2 on). The
 * caller makes the first try itself, outside any retry machinery: nearly every write commits at
 * once, and a loop's closures and promise layers around it were ~7 % of a durable run's Node CPU
 * (retryJournalWrite, whose comment has the figures).
 */
export async function retryAfterFailure<T>(
  write: (attempt: number) => Promise<T>,
  retryable: (e: unknown) => boolean,
  o: CommitRetryOptions & { firstFailure: { error: unknown } },
): Promise<CommitResult<T> & { attempts: number }> {
  let refused: { error: unknown } | undefined;
  let attempts = 1;
  const r = await commitWithRetry(async () => {
    attempts++;
    try {
      return { value: await write(attempts) };
    } catch (e) {
      if (retryable(e)) throw e;
      refused = { error: e };
      return undefined;
    }
  }, o);
  if (refused !== undefined) throw refused.error;
  // Defined when ok: a try that returned nothing was refused, thrown above.
  return r.ok ? { ok: true, value: r.value!.value, attempts } : { ...r, attempts };
}

/**
 * An AbortController for a stop deadline that every retry of an outage waits on: each waiting retry
 * adds a listener to its signal, so past ten of them Node warned (MaxListenersExceededWarning) as
 * for a leak. The listeners go when each wait ends; none is leaked.
 */
export function unlimitedAbort(): AbortController {
  const c = new AbortController();
  setMaxListeners(0, c.signal);
  return c;
}
