/** A value a durable run journals (a step's value, a call's result, the run's output) as JSON text, refused in the limits' words when JSON cannot hold it. */
import { OkeError } from "../errors.ts";
import { journalJson, MAX_DEPTH } from "../signal/storable.ts";

/** Where the first BigInt in `value` is (`$.a[2]`), or undefined; walks as deep as the depth limit allows. */
function bigIntPath(value: unknown, path: string, depth: number): string | undefined {
  if (typeof value === "bigint") return path;
  if (typeof value !== "object" || value === null || depth > MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = bigIntPath(value[i], `${path}[${i}]`, depth + 1);
      if (p !== undefined) return p;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    const p = bigIntPath(
      v,
      /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`,
      depth + 1,
    );
    if (p !== undefined) return p;
  }
  return undefined;
}

/**
 * journalJson, except that a BigInt (which JSON.stringify refuses with a bare TypeError naming
 * nothing) fails with OKE1306 naming the subject (the step and run) and where the BigInt is.
 * Status 500: the value came from the flow's code.
 */
export function journalValue(value: unknown, subject: string): string | undefined {
  try {
    return journalJson(value, subject);
  } catch (e) {
    const path = e instanceof TypeError ? bigIntPath(value, "$", 1) : undefined;
    if (path === undefined) throw e;
    throw bigIntRefused(subject, path);
  }
}

const bigIntRefused = (subject: string, path: string): OkeError =>
  new OkeError({
    code: "OKE1306",
    message: `${subject}: value at ${path} is a BigInt, which JSON cannot hold`,
    fix: "Return it as a string (String(n)) or a number, and convert it back after the step.",
  });

/**
 * A plain flow's step value as a durable one's comes back: through JSON, without the journal's limits
 * (nothing is stored). A BigInt is refused as OKE1306 naming the step, as a durable step refuses it.
 */
export function jsonRoundTrip(value: unknown, subject: string): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    const path = e instanceof TypeError ? bigIntPath(value, "$", 1) : undefined;
    if (path === undefined) throw e;
    throw bigIntRefused(subject, path);
  }
  return text === undefined ? undefined : JSON.parse(text);
}
