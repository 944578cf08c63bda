/** The bounded wait of a graceful stop for the store's mark on what it leaves to lapse (leaveToLease, leaveClaimsToLease). */

/**
 * How long a stop waits for that mark. Unmarked, what it left is taken over as after a crash (a
 * recovery, an attempt counted): the mark is worth a short wait, not holding the exit on an outage.
 */
export const STOP_MARK_TIMEOUT_MS = 2_000;

/**
 * The mark's answer, or `"late"` when it has none within STOP_MARK_TIMEOUT_MS (its rejection after
 * that is ignored: the caller has logged the mark as missing). A rejection in time rejects.
 */
export async function markWithin<T>(mark: Promise<T>): Promise<T | "late"> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((r) => {
    timer = setTimeout(() => r("late"), STOP_MARK_TIMEOUT_MS);
    timer.unref();
  });
  try {
    const out = await Promise.race([mark, late]);
    if (out === "late") mark.catch(() => undefined);
    return out;
  } finally {
    clearTimeout(timer);
  }
}
