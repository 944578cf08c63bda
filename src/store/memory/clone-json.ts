/** cloneJson: a fast deep copy of JSON data for the memory driver. */
/**
 * Deep copy of JSON data. Stored payloads are copied on the way in and on the
 * way out so no caller can mutate stored state. Plain objects and arrays take
 * a hand-written path — structuredClone costs microseconds per call, which
 * alone would cap the queue below its throughput target; anything else (Date,
 * Map …) falls back to structuredClone.
 */
export function cloneJson<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    const out: unknown[] = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = cloneJson<unknown>(value[i]);
    return out as T;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const src = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  // for…in, not Object.keys: no key array per copy. The prototype is Object.prototype or null
  // (checked above), so only own keys are enumerable unless something polluted Object.prototype.
  for (const k in src) {
    if (!Object.hasOwn(src, k)) continue;
    // JSON.parse makes "__proto__" an own key; plain assignment would set the prototype instead.
    if (k === "__proto__")
      Object.defineProperty(out, k, {
        value: cloneJson(src[k]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else out[k] = cloneJson(src[k]);
  }
  return out as T;
}
