/** Jsonify<T>: the type a value has after a round trip through JSON, the type fx.step resolves with. */

/** Values JSON.stringify leaves out of an object (and writes as null in an array). */
type Unwritable = undefined | symbol | ((...args: never[]) => unknown);

/**
 * What `JSON.parse(JSON.stringify(value))` gives for a value of type `T`: a `Date` (anything with
 * `toJSON`) is what its `toJSON` returns (a string), a `Map` or `Set` is `{}`, methods and
 * function or symbol properties are gone, `undefined` in an array is `null`. A step's value is
 * journaled as JSON and every attempt (the first included) gets it back from there, so this is
 * what `fx.step` resolves with: `d.getFullYear()` on a step that returned a `Date` is a type error
 * rather than a TypeError on the replay. BigInt is refused at run time (OKE1306), so it is `never`.
 */
export type Jsonify<T> = 0 extends 1 & T
  ? T // any stays any
  : unknown extends T
    ? unknown
    : T extends void
      ? T
      : T extends { toJSON(...args: never[]): infer J }
        ? J extends T
          ? J
          : Jsonify<J>
        : T extends string | number | boolean | null
          ? T
          : T extends bigint | symbol | ((...args: never[]) => unknown)
            ? never
            : T extends ReadonlyMap<unknown, unknown> | ReadonlySet<unknown>
              ? Record<string, never>
              : T extends readonly unknown[]
                ? { [K in keyof T]: InArray<T[K]> }
                : T extends object
                  ? {
                      [
                        K in keyof T as K extends symbol ? never : T[K] extends Unwritable ? never : K
                      ]: Jsonify<T[K]>;
                    }
                  : never;

/** An array element: one JSON cannot write is null there (distributes over a union element). */
type InArray<V> = V extends Unwritable ? null : Jsonify<V>;
