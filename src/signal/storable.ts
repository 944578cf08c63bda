// What every store driver can hold: one set of limits checked before anything is written, so an app tested on memory behaves as on PostgreSQL.
import { OkeError } from "../errors.ts";

/** Deepest nesting of objects/arrays an emit payload or request body may have. */
export const MAX_DEPTH = 64;
/** Largest emit payload, in bytes of its JSON text (UTF-8). */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Longest emit key, in bytes of UTF-8 (PostgreSQL indexes keys; a btree row holds ~2.7 KB). */
export const MAX_KEY_BYTES = 512;

const LIMIT_FIX = "See docs/signals.md#what-a-payload-may-hold for the limits every driver applies.";

export const storableErrors = {
  tooDeep: (subject: string, path: string) =>
    new OkeError({
      code: "OKE1252",
      status: 422,
      message: `${subject}: nested deeper than ${MAX_DEPTH} levels (or circular) at ${path}`,
      fix: LIMIT_FIX,
    }),
  tooLarge: (subject: string, bytes: number) =>
    new OkeError({
      code: "OKE1253",
      status: 422,
      message: `${subject}: payload is ${bytes} bytes as JSON, more than the ${MAX_PAYLOAD_BYTES} an emit may carry`,
      fix: "Store large content elsewhere and emit a reference to it.",
    }),
  journalTooLarge: (subject: string, bytes: number) =>
    new OkeError({
      code: "OKE1253",
      // The subject names what (a step's value, a call's result, a run's output): the limit is per value.
      message: `${subject}: value is ${bytes} bytes as JSON, more than the ${MAX_PAYLOAD_BYTES} a durable run may store per value`,
      fix: "Keep large content elsewhere and return a reference to it (from the step, the call or the flow).",
    }),
  keyTooLong: (subject: string, bytes: number) =>
    new OkeError({
      code: "OKE1254",
      status: 422,
      message: `${subject}: key is ${bytes} bytes, more than ${MAX_KEY_BYTES}`,
      fix: "Use a shorter key, for example an id or a hash of the long value.",
    }),
  nul: (subject: string, path: string) =>
    new OkeError({
      code: "OKE1255",
      status: 422,
      message: `${subject}: string at ${path} contains a NUL character (\\u0000)`,
      fix: LIMIT_FIX,
    }),
  loneSurrogate: (subject: string, path: string) =>
    new OkeError({
      code: "OKE1256",
      status: 422,
      message: `${subject}: string at ${path} contains a lone UTF-16 surrogate (not valid Unicode)`,
      fix: LIMIT_FIX,
    }),
} as const;

// One regex pass finds both problems; only a hit pays for telling them apart.
// eslint-disable-next-line no-control-regex
const SUSPECT = /[\u0000\uD800-\uDFFF]/;
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Throws OKE1255 / OKE1256 when `s` cannot be stored as text on every driver. */
export function checkText(s: string, subject: string, path: string): void {
  if (!SUSPECT.test(s)) return;
  if (s.includes("\u0000")) throw storableErrors.nul(subject, path);
  if (!wellFormed(s)) throw storableErrors.loneSurrogate(subject, path);
}

const segment = (parent: string, k: string | number): string =>
  typeof k === "number"
    ? `${parent}[${k}]`
    : /^[A-Za-z_$][\w$]*$/.test(k)
      ? `${parent}.${k}`
      : `${parent}[${JSON.stringify(k)}]`;

/**
 * Walks a JSON-like value without recursion (a hostile depth cannot overflow
 * the stack) and throws the first problem: depth past MAX_DEPTH (OKE1252), a
 * NUL (OKE1255) or lone surrogate (OKE1256) in a string or an object key.
 * Paths are built only for the error, from the stack of the walk.
 */
export function checkStorable(value: unknown, subject: string): void {
  if (typeof value === "string") return checkText(value, subject, "$");
  if (typeof value !== "object" || value === null) return;
  // Explicit stack: [container, path, depth]. Paths are strings built as we go; containers are few.
  const stack: Array<[object, string, number]> = [[value, "$", 1]];
  while (stack.length > 0) {
    const [node, path, depth] = stack.pop()!;
    if (depth > MAX_DEPTH) throw storableErrors.tooDeep(subject, path);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i];
        if (typeof v === "string") checkText(v, subject, segment(path, i));
        else if (typeof v === "object" && v !== null) stack.push([v, segment(path, i), depth + 1]);
      }
      continue;
    }
    for (const k of Object.keys(node)) {
      if (SUSPECT.test(k)) checkText(k, subject, `${segment(path, k)} (the key)`);
      const v: unknown = (node as Record<string, unknown>)[k];
      if (typeof v === "string") checkText(v, subject, segment(path, k));
      else if (typeof v === "object" && v !== null) stack.push([v, segment(path, k), depth + 1]);
    }
  }
}

/** Throws OKE1254 / OKE1255 / OKE1256 for an emit key the store could not index. */
export function checkKey(key: string, subject: string): void {
  // Cheap bound first: a UTF-16 unit is at most 3 UTF-8 bytes.
  if (key.length * 3 > MAX_KEY_BYTES) {
    const bytes = Buffer.byteLength(key, "utf8");
    if (bytes > MAX_KEY_BYTES) throw storableErrors.keyTooLong(subject, bytes);
  }
  checkText(key, subject, "key");
}

/** Throws OKE1253 when the payload's JSON text is past MAX_PAYLOAD_BYTES. */
export function checkPayloadSize(json: string, subject: string): void {
  if (json.length * 3 <= MAX_PAYLOAD_BYTES) return;
  const bytes = Buffer.byteLength(json, "utf8");
  if (bytes > MAX_PAYLOAD_BYTES) throw storableErrors.tooLarge(subject, bytes);
}

/**
 * The JSON text of a value a durable run journals (a step's value, a call's
 * result, a run's output), after the same checks as an emit payload: depth
 * (OKE1252), NUL (OKE1255), lone surrogates (OKE1256), size (OKE1253). The
 * value comes from the app's code, not the client, so these are 500s.
 */
export function journalJson(value: unknown, subject: string): string | undefined {
  try {
    checkStorable(value, subject);
  } catch (e) {
    throw e instanceof OkeError
      ? new OkeError({ code: e.code, message: e.message, ...(e.fix === undefined ? {} : { fix: e.fix }) })
      : e;
  }
  const json = value === undefined ? undefined : JSON.stringify(value);
  if (json !== undefined && json.length * 3 > MAX_PAYLOAD_BYTES) {
    const bytes = Buffer.byteLength(json, "utf8");
    if (bytes > MAX_PAYLOAD_BYTES) throw storableErrors.journalTooLarge(subject, bytes);
  }
  return json;
}

/** A name the journal stores (a step name, a sleep label): OKE1255 / OKE1256 as a 500. */
export function checkJournalName(name: string, subject: string, what: string): void {
  try {
    checkText(name, subject, what);
  } catch (e) {
    throw e instanceof OkeError
      ? new OkeError({ code: e.code, message: e.message, ...(e.fix === undefined ? {} : { fix: e.fix }) })
      : e;
  }
}

/**
 * The input of a durable run, checked before its run row is written: the
 * limits of an emit payload, the size counted against what a run's input may
 * hold. From a caller (`app.invoke`) these are the limits' 422s; from the app's
 * own code (`fx.call`) they are 500s, as for a step's value.
 */
export function checkRunInput(value: unknown, subject: string, fromCaller: boolean): void {
  try {
    checkStorable(value, subject);
    const json = value === undefined ? undefined : JSON.stringify(value);
    if (json !== undefined && json.length * 3 > MAX_PAYLOAD_BYTES) {
      const bytes = Buffer.byteLength(json, "utf8");
      if (bytes > MAX_PAYLOAD_BYTES)
        throw new OkeError({
          code: "OKE1253",
          status: 422,
          message: `${subject}: input is ${bytes} bytes as JSON, more than the ${MAX_PAYLOAD_BYTES} a run's input may hold`,
          fix: "Keep large content elsewhere and pass a reference to it.",
        });
    }
  } catch (e) {
    throw e instanceof OkeError && !fromCaller
      ? new OkeError({ code: e.code, message: e.message, ...(e.fix === undefined ? {} : { fix: e.fix }) })
      : e;
  }
}
