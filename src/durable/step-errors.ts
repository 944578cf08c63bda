/** A failed step or call as the flow sees it: rebuilt from what the journal holds, the same on the first attempt and on every replay. */
import { errorRecord, OkeError } from "../errors.ts";
import { journalJson } from "../signal/storable.ts";

/** A journaled step or call failure, rethrown to the flow; `name`, `code` and the error's own fields are kept. */
export class StepError extends Error {
  override name = "StepError";
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * What the journal keeps of a failure beyond `{ code, message }`: the entry's `error.detail` (every
 * driver stores it as JSON data beside code and message). Entries journaled before it have none and
 * come back as a plain StepError.
 */
export interface FailureDetail {
  /** The error's name ("Declined", "TypeError"); absent for a thrown value that is not an Error. */
  name?: string;
  /** The failure was an OkeError: it comes back as one, with these. */
  oke?: { status: number; fix?: string; details?: unknown; expose: boolean; passing: boolean };
  /** The error's own enumerable properties that JSON holds (others are left out). */
  fields?: Record<string, unknown>;
  /** Its `cause`, the same way, a few levels down. */
  cause?: { code: string; message: string; detail?: FailureDetail };
}

/** What a failure journals as the entry's `error`. */
export interface JournaledFailure {
  code: string;
  message: string;
  detail?: FailureDetail;
}

const NOT_FIELDS = new Set(["name", "message", "stack", "code", "cause"]);
const OKE_OWN = new Set(["status", "fix", "details", "expose", "passing"]);
const MAX_CAUSES = 4;

/** `v` as JSON data when every driver can store it; undefined otherwise (a function, a BigInt, a cycle). */
function storableCopy(v: unknown): unknown {
  try {
    const text = journalJson(v, "error field");
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

function detailOf(e: unknown, depth: number): FailureDetail | undefined {
  if (!(e instanceof Error)) return undefined;
  const d: FailureDetail = {};
  if (typeof e.name === "string") d.name = e.name;
  if (e instanceof OkeError) {
    d.oke = { status: e.status, expose: e.expose, passing: e.passing };
    if (e.fix !== undefined) d.oke.fix = e.fix;
    const details = storableCopy(e.details);
    if (details !== undefined) d.oke.details = details;
  }
  const fields: Record<string, unknown> = {};
  let any = false;
  for (const k of Object.keys(e)) {
    if (NOT_FIELDS.has(k) || (d.oke && OKE_OWN.has(k))) continue;
    const v = storableCopy((e as unknown as Record<string, unknown>)[k]);
    if (v === undefined) continue;
    fields[k] = v;
    any = true;
  }
  if (any) d.fields = fields;
  if (e.cause !== undefined && depth < MAX_CAUSES) {
    const detail = detailOf(e.cause, depth + 1);
    d.cause = { ...errorRecord(e.cause), ...(detail ? { detail } : {}) };
  }
  return d;
}

/** What the journal records of a failure; a detail the journal's limits refuse shrinks to the name. */
export function journaledFailure(e: unknown): JournaledFailure {
  const error = errorRecord(e);
  const detail = detailOf(e, 0);
  if (detail === undefined) return error;
  const copy = storableCopy(detail) as FailureDetail | undefined;
  if (copy !== undefined) return { ...error, detail: copy };
  const name = storableCopy(detail.name) as string | undefined;
  return name === undefined ? error : { ...error, detail: { name } };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The error a journaled failure rethrows: a StepError, or an OkeError when one failed; fields restored. */
export function restoreFailure(error: { code: string; message: string }): Error {
  const detail = (error as { detail?: unknown }).detail;
  const d: FailureDetail = isRecord(detail) ? detail : {};
  const cause = isRecord(d.cause) ? restoreFailure(d.cause) : undefined;
  const causeOpt = cause === undefined ? undefined : { cause };
  let e: Error;
  if (isRecord(d.oke)) {
    const o = d.oke;
    e = new OkeError({
      code: error.code,
      message: error.message,
      status: o.status,
      expose: o.expose,
      passing: o.passing,
      ...(o.fix === undefined ? {} : { fix: o.fix }),
      ...(o.details === undefined ? {} : { details: o.details }),
      ...(cause === undefined ? {} : { cause }),
    });
  } else e = new StepError(error.code, error.message, causeOpt);
  // Own properties, set by definition: a field named "__proto__" must not become the prototype.
  if (typeof d.name === "string")
    Object.defineProperty(e, "name", { value: d.name, writable: true, configurable: true, enumerable: true });
  if (isRecord(d.fields))
    for (const [k, v] of Object.entries(d.fields))
      Object.defineProperty(e, k, { value: v, writable: true, configurable: true, enumerable: true });
  return e;
}

/**
 * A failure of the first attempt, journaled (or held) as `journal` and thrown to the body as `thrown`:
 * the error a replay rebuilds from the journal, so code that catches it takes the same path on both.
 * The original's stack is kept on it for the logs.
 */
export function firstFailure(e: unknown): { journal: JournaledFailure; thrown: Error } {
  const journal = journaledFailure(e);
  const thrown = restoreFailure(journal);
  if (e instanceof Error && typeof e.stack === "string") thrown.stack = e.stack;
  return { journal, thrown };
}
