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
 * An AbortController for a stop deadline that every retry of an outage waits on: each waiting retry
 * adds a listener to its signal, so past ten of them Node warned (MaxListenersExceededWarning) as
 * for a leak. The listeners go when each wait ends; none is leaked.
 */
export function unlimitedAbort(): AbortController {
  const c = new AbortController();
  setMaxListeners(0, c.signal);
  return c;
}
