/** flow(): a behaviour with its input/output contracts, durability and declared effects. */
import type { Fx } from "../fx/types.ts";
import type { Schema } from "../schema.ts";
import { isSchema } from "../schema.ts";
import { normalizeEffects, type DeclaredEffects, type Effects } from "./effects.ts";

export interface FlowOptions<I, O, D extends boolean = boolean> {
  /** Input contract, checked before `do` runs (HTTP answers 422, `fx.call` throws). */
  in?: Schema<I>;
  /** Output contract, checked on return. */
  out?: Schema<O>;
  /** Journal steps and sleeps so the run survives crashes and can park. Default `false`. */
  durable?: D;
  /** Declared effects; undeclared reads throw OKE1001. */
  effects?: Effects;
  /** Console / docs blurb. */
  description?: string;
  /** The body. Its input is the trigger's payload or the `in` schema's output. */
  do: (input: I, fx: Fx) => Promise<O> | O;
}

/**
 * A flow. `D` is `true` for one declared `durable: true` (a literal), so a caller's types can tell
 * that a run of it may park and answer no value yet; `boolean` when not known (declared without
 * `durable`, or with a non-literal value).
 */
export interface Flow<I = unknown, O = unknown, D extends boolean = boolean> {
  readonly kind: "flow";
  /** Explicit name, or undefined until the app names it `<unit>.<export>`. */
  readonly name: string | undefined;
  readonly in: Schema<I> | undefined;
  readonly out: Schema<O> | undefined;
  readonly durable: D;
  readonly effects: DeclaredEffects;
  readonly description: string | undefined;
  // Method syntax on purpose: keeps Flow<P> assignable to Flow<unknown> for storage.
  do(input: I, fx: Fx): Promise<O> | O;
}

export type AnyFlow = Flow<unknown, unknown>;

/** What running a flow came to: its value, or (durable) the run parked and will resume later. */
export type InvokeResult = { kind: "returned"; value: unknown } | { kind: "parked"; runId: string };

const FLOW_KEYS = new Set(["in", "out", "durable", "effects", "description", "do"]);

/**
 * Declares a Flow: `flow("workers.email", { do })` or `flow({ in, do })`. `durable: true` gives a
 * `Flow<I, O, true>`; without `durable` the flow's `D` stays `boolean` (see Flow).
 */
export function flow<I = unknown, O = unknown, D extends boolean = boolean>(
  name: string,
  options: FlowOptions<I, O, D>,
): Flow<I, O, D>;
export function flow<I = unknown, O = unknown, D extends boolean = boolean>(
  options: FlowOptions<I, O, D>,
): Flow<I, O, D>;
export function flow<I, O, D extends boolean>(
  a: string | FlowOptions<I, O, D>,
  b?: FlowOptions<I, O, D>,
): Flow<I, O, D> {
  const name = typeof a === "string" ? a : undefined;
  const options = typeof a === "string" ? b : a;
  const where = name === undefined ? "flow()" : `flow("${name}")`;
  if (name !== undefined && name.trim() === "")
    throw new TypeError("flow(name): name must be a non-empty string");
  if (typeof options !== "object" || options === null)
    throw new TypeError(`${where}: options with a do function are required`);
  for (const k of Object.keys(options)) {
    if (!FLOW_KEYS.has(k)) throw new TypeError(`${where}: unknown option "${k}"`);
  }
  if (typeof options.do !== "function") throw new TypeError(`${where}: do must be a function`);
  if (options.in !== undefined && !isSchema(options.in))
    throw new TypeError(`${where}: in must be a Standard Schema`);
  if (options.out !== undefined && !isSchema(options.out))
    throw new TypeError(`${where}: out must be a Standard Schema`);
  if (options.durable !== undefined && typeof options.durable !== "boolean") {
    throw new TypeError(`${where}: durable must be a boolean`);
  }
  return Object.freeze({
    kind: "flow",
    name,
    in: options.in,
    out: options.out,
    // Without `durable`, D is `boolean`: false is one.
    durable: options.durable ?? (false as D),
    effects: normalizeEffects(where, options.effects),
    description: options.description,
    do: options.do,
  });
}

export const isFlow = (v: unknown): v is Flow =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "flow";

/** A copy of `f` carrying the name the app gave it (and the effects it read from the source, if any). */
export const withName = <I, O, D extends boolean>(
  f: Flow<I, O, D>,
  name: string,
  effects = f.effects,
): Flow<I, O, D> => Object.freeze({ ...f, name, effects });
