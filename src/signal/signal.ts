/** signal.once / signal.broadcast / signal.live: declaring signals and their options. */
import { isDuration, parseDuration, type Duration } from "../clock/duration.ts";
import { isSchema, type StandardSchemaV1 } from "../schema.ts";

type JsonPrimitive = string | number | boolean | null;
/** Values JSON gives back as they were (`undefined`: an optional property it leaves out). */
type JsonSame = JsonPrimitive | readonly JsonSame[] | { readonly [k: string]: JsonSame | undefined };
type Dropped = undefined | symbol | ((...args: never[]) => unknown);

/**
 * A value as it comes back from JSON, which is how a payload reaches its handler: a schema's
 * output is stored as JSON, so a `Date` a transform made arrives as its ISO string, and what JSON
 * drops (functions, symbols, undefined properties) is gone.
 */
export type JsonOf<T> = unknown extends T
  ? T
  : T extends JsonSame
    ? T
    : T extends { toJSON(): infer J }
      ? JsonOf<J>
      : T extends Dropped | bigint
        ? never
        : T extends readonly unknown[]
          ? { [K in keyof T]: JsonOf<T[K]> }
          : T extends object
            ? { [K in keyof T as T[K] extends Dropped ? never : K]: JsonOf<T[K]> }
            : T;

/**
 * Options shared by every signal helper. Defaults: `schema` none,
 * `optional: false`, `description` the signal's name.
 */
export interface SignalOptionsBase<P, In = P> {
  /**
   * Emit contract, checked at `fx.emit` / `app.emit` (OKE1250). Any Standard Schema. Default: none
   * (payloads are not checked). An emit takes the schema's input; its output is stored as JSON and
   * that JSON is what the handler receives (a transform to a `Date` arrives as a string).
   */
  schema?: StandardSchemaV1<In, P>;
  /** Allow emits while no flow is bound (otherwise OKE1240). Default `false`. On `signal.live` it changes nothing. */
  optional?: boolean;
  /** Console / docs blurb. Default: the signal name. */
  description?: string;
}

/**
 * Options of `signal.once`. Defaults: `retries: 3`, `deadLetter: true`,
 * `optional: false`, `schema` none, `description` the signal's name.
 */
export interface OnceOptions<P, In = P> extends SignalOptionsBase<P, In> {
  /** Extra attempts after the first: `retries + 1` invocations in total. Default `3`. */
  retries?: number;
  /** Keep exhausted messages as `dead` (`true`) or mark them `delivered` (`false`). Default `true`. */
  deadLetter?: boolean;
}

/** Options of `signal.broadcast`. Defaults: `optional: false`, `schema` none, `description` the signal's name. */
export type BroadcastOptions<P, In = P> = SignalOptionsBase<P, In>;

/**
 * Options of `signal.live`. Defaults: `retention: "24h"`, `schema` none,
 * `description` the signal's name (`optional` changes nothing: the tape is its own subscriber).
 */
export interface LiveOptions<P, In = P> extends SignalOptionsBase<P, In> {
  /** How long entries stay on the tape for readers resuming, e.g. `"1h"` (grammar as fx.clock.sleep). Default `"24h"`. */
  retention?: Duration;
}

export type Delivery = "once" | "broadcast" | "live";

/**
 * `P`: the payload a handler receives (the schema's output as JSON); `In`: what an emit takes (the
 * schema's input), where `unknown` (the default) means `P`. They differ only when the schema has
 * defaults or transforms. `In` only widens, so `OnceSignal<P>` accepts every signal of payload `P`.
 */
interface SignalBase<P, D extends Delivery, In> {
  readonly kind: "signal";
  readonly delivery: D;
  readonly name: string;
  readonly schema: StandardSchemaV1<In, unknown> | undefined;
  readonly optional: boolean;
  readonly description: string;
  /** Phantom: the payload type, for inference only. */
  readonly __payload?: P;
  /** Phantom: the emit's input type, for inference only. */
  readonly __emit?: In;
}

export interface OnceSignal<P = unknown, In = unknown> extends SignalBase<P, "once", In> {
  readonly retries: number;
  readonly deadLetter: boolean;
}
export type BroadcastSignal<P = unknown, In = unknown> = SignalBase<P, "broadcast", In>;
export interface LiveSignal<P = unknown, In = unknown> extends SignalBase<P, "live", In> {
  readonly retention: string | undefined;
}
export type SignalHandle<P = unknown, In = unknown> =
  OnceSignal<P, In> | BroadcastSignal<P, In> | LiveSignal<P, In>;
/** The payload a signal's handler receives. */
export type PayloadOf<S> = S extends SignalBase<infer P, Delivery, unknown> ? P : never;
/** What an emit takes, from a signal's `P` and `In`: the schema's input, or `P` when `In` is unknown. */
export type EmitInput<P, In> = unknown extends In ? P : In;
/** What an emit of the signal takes. */
export type EmitInputOf<S> = S extends SignalBase<infer P, Delivery, infer In> ? EmitInput<P, In> : never;

const KNOWN: Record<Delivery, readonly string[]> = {
  once: ["schema", "optional", "description", "retries", "deadLetter"],
  broadcast: ["schema", "optional", "description"],
  live: ["schema", "optional", "description", "retention"],
};

function checkCommon(helper: Delivery, name: unknown, options: object): asserts name is string {
  if (typeof name !== "string" || name.trim() === "") {
    throw new TypeError(`signal.${helper}(name): name must be a non-empty string`);
  }
  const opts = options as Record<string, unknown>;
  if (helper !== "live" && "retention" in opts) {
    throw new TypeError(`signal.${helper}("${name}"): retention is only valid with signal.live`);
  }
  for (const key of Object.keys(opts)) {
    if (!KNOWN[helper].includes(key)) {
      const hint =
        key === "leaseMs" ? " (the lease is set when the app opens the bus, not on the signal)" : "";
      throw new TypeError(`signal.${helper}("${name}"): unknown option "${key}"${hint}`);
    }
  }
  if (opts.schema !== undefined && !isSchema(opts.schema)) {
    throw new TypeError(
      `signal.${helper}("${name}"): schema must be a Standard Schema (zod, valibot, arktype …)`,
    );
  }
  if (opts.optional !== undefined && typeof opts.optional !== "boolean") {
    throw new TypeError(`signal.${helper}("${name}"): optional must be a boolean`);
  }
  if (opts.description !== undefined && typeof opts.description !== "string") {
    throw new TypeError(`signal.${helper}("${name}"): description must be a string`);
  }
}

function once<P = unknown, In = P>(
  name: string,
  options: OnceOptions<P, In> = {},
): OnceSignal<JsonOf<P>, In> {
  checkCommon("once", name, options);
  const { retries = 3, deadLetter = true } = options;
  if (!Number.isInteger(retries) || retries < 0) {
    throw new TypeError(
      `signal.once("${name}"): retries must be a non-negative integer, got ${String(retries)}`,
    );
  }
  if (typeof deadLetter !== "boolean") {
    throw new TypeError(
      `signal.once("${name}"): deadLetter must be a boolean, got ${JSON.stringify(deadLetter)} (dead letters are read with fx.deadLetters(signal), not a named queue)`,
    );
  }
  return Object.freeze({
    kind: "signal",
    delivery: "once",
    name,
    schema: options.schema,
    optional: options.optional ?? false,
    description: options.description ?? name,
    retries,
    deadLetter,
  });
}

function broadcast<P = unknown, In = P>(
  name: string,
  options: BroadcastOptions<P, In> = {},
): BroadcastSignal<JsonOf<P>, In> {
  checkCommon("broadcast", name, options);
  return Object.freeze({
    kind: "signal",
    delivery: "broadcast",
    name,
    schema: options.schema,
    optional: options.optional ?? false,
    description: options.description ?? name,
  });
}

function live<P = unknown, In = P>(
  name: string,
  options: LiveOptions<P, In> = {},
): LiveSignal<JsonOf<P>, In> {
  checkCommon("live", name, options);
  if (
    options.retention !== undefined &&
    (!isDuration(options.retention) || parseDuration(options.retention) <= 0)
  ) {
    throw new TypeError(
      `signal.live("${name}"): retention must be a duration like "24h", "30m" or "7d", got ${JSON.stringify(options.retention)}`,
    );
  }
  return Object.freeze({
    kind: "signal",
    delivery: "live",
    name,
    schema: options.schema,
    optional: options.optional ?? false,
    description: options.description ?? name,
    retention: options.retention,
  });
}

/** Signal declarations. The helper name is the delivery: once · broadcast · live. */
export const signal = { once, broadcast, live } as const;

export const isSignal = (v: unknown): v is SignalHandle =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "signal";
