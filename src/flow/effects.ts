/** What a flow declares it touches. Reads are enforced (OKE1001), hand-written emits checked (a warning); all are in the Manifest. */
export interface Effects {
  /** Resources read, e.g. `"signal:tasks.email"` for `fx.deadLetters`. */
  reads?: readonly string[];
  /** Signal names emitted. */
  emits?: readonly string[];
  /** Channel names sent to. */
  sends?: readonly string[];
  /** Flow names called. */
  calls?: readonly string[];
}

export interface DeclaredEffects {
  reads: readonly string[];
  emits: readonly string[];
  sends: readonly string[];
  calls: readonly string[];
}

/** The effects of a flow that declares none: the app may fill them in from its source. */
export const NO_EFFECTS: DeclaredEffects = Object.freeze({
  reads: Object.freeze([]),
  emits: Object.freeze([]),
  sends: Object.freeze([]),
  calls: Object.freeze([]),
});

/** `"signal:<name>"`, the resource `fx.deadLetters(signal)` reads: `effects: { reads: [signalReadRef(emailTask)] }`. */
export const signalReadRef = (signal: { readonly name: string }): `signal:${string}` =>
  `signal:${signal.name}`;

/** Which lists a flow() call wrote by hand (not recorded from the source): emits are checked against them. */
const handWritten = new WeakMap<DeclaredEffects, ReadonlySet<string>>();

/** True when a flow() call declared `key` itself (`effects: { emits: [...] }`), see normalizeEffects. */
export const isHandWritten = (effects: DeclaredEffects, key: keyof DeclaredEffects): boolean =>
  handWritten.get(effects)?.has(key) === true;

export function normalizeEffects(where: string, effects: Effects | undefined): DeclaredEffects {
  const out: Record<keyof DeclaredEffects, readonly string[]> = {
    reads: [],
    emits: [],
    sends: [],
    calls: [],
  };
  if (effects === undefined) return NO_EFFECTS;
  if (typeof effects !== "object" || effects === null)
    throw new TypeError(`${where}: effects must be an object`);
  for (const [k, v] of Object.entries(effects)) {
    if (!(k in out))
      throw new TypeError(`${where}: unknown effects key "${k}" (expected reads, emits, sends, calls)`);
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
      throw new TypeError(`${where}: effects.${k} must be an array of strings`);
    }
    out[k as keyof DeclaredEffects] = Object.freeze([...v]);
  }
  const declared = Object.freeze(out);
  handWritten.set(declared, new Set(Object.keys(effects)));
  return declared;
}
