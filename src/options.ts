// Refuses option keys an options type does not have, by name (a typo must not be silently ignored).

/**
 * The allowed keys of an options type, written next to the type as
 * `{ a: true, b: true } as const satisfies KeysOf<Options>` so that adding a
 * key to the type without adding it here is a type error.
 */
export type KeysOf<T> = Record<keyof T, true>;

/** The first key of `value` not in `allowed`, or undefined. */
export function unknownKey(value: unknown, allowed: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  return Object.keys(value).find((key) => !Object.hasOwn(allowed, key));
}

/** Throws `TypeError('<where>: unknown option "k" (expected a, b)')` for the first unknown key. */
export function refuseUnknownKeys(
  where: string,
  value: unknown,
  allowed: Readonly<Record<string, unknown>>,
  hints: Readonly<Record<string, string>> = {},
): void {
  const key = unknownKey(value, allowed);
  if (key === undefined) return;
  throw new TypeError(
    `${where}: unknown option "${key}" (${hints[key] ?? `expected ${Object.keys(allowed).join(", ")}`})`,
  );
}
