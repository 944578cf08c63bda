/** Whether a journal entry sent again carries what is stored at its position: the check behind a lost-reply retry. */
import type { JournalEntry } from "./types.ts";

/**
 * True when `sent` holds the same content as `stored` (kind and name are
 * compared by the caller): the same value as JSON data (key order ignored, as
 * PostgreSQL's jsonb ignores it), the same error, and for a sleep the same
 * duration and wake time. `at` is not compared: it is when the entry was made.
 */
export function sameEntryContent(stored: JournalEntry, sent: JournalEntry): boolean {
  if (!jsonEqual(stored.value, sent.value)) return false;
  if ((stored.error === undefined) !== (sent.error === undefined)) return false;
  if (stored.error && sent.error) {
    if (stored.error.code !== sent.error.code || stored.error.message !== sent.error.message) return false;
    if (!jsonEqual(errorDetail(stored.error), errorDetail(sent.error))) return false;
  }
  if (stored.kind === "sleep" && sent.kind === "sleep")
    return stored.duration === sent.duration && stored.wakeAt === sent.wakeAt;
  return true;
}

/**
 * A journaled failure as a driver keeps it: its code and message, and the `detail` the runtime
 * records beside them (the error's name, fields, cause; see src/durable/step-errors.ts) as JSON data.
 * Entries journaled before it have no detail. PostgreSQL stores the error object as it is.
 */
export function storedError(error: { code: string; message: string }): { code: string; message: string } {
  const detail = errorDetail(error);
  return detail === undefined
    ? { code: error.code, message: error.message }
    : ({
        code: error.code,
        message: error.message,
        detail: JSON.parse(JSON.stringify(detail)) as unknown,
      } as {
        code: string;
        message: string;
      });
}

const errorDetail = (error: { code: string; message: string }): unknown =>
  (error as { detail?: unknown }).detail;

/** Deep equality of JSON data; an object's properties set to `undefined` count as absent, as in JSON. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = (o: Record<string, unknown>): string[] => Object.keys(o).filter((k) => o[k] !== undefined);
  const kx = keys(x);
  if (kx.length !== keys(y).length) return false;
  for (const k of kx) if (!Object.hasOwn(y, k) || !jsonEqual(x[k], y[k])) return false;
  return true;
}
