/** signal.once / signal.broadcast / signal.live: declaring signals and their options. */
import { isDuration, parseDuration } from "../clock/duration.ts";
import { isSchema, type Schema } from "../schema.ts";

/**
 * Options shared by every signal helper. Defaults: `schema` none,
 * `optional: false`, `description` the signal's name.
 */
export interface SignalOptionsBase<P> {
  /** Emit contract, checked at `fx.emit` / `app.emit` (OKE1250). Any Standard Schema. Default: none (payloads are not checked). */
  schema?: Schema<P>;
  /** Allow emits while no flow is bound (otherwise OKE1240). Default `false`. On `signal.live` it changes nothing. */
  optional?: boolean;
  /** Console / docs blurb. Default: the signal name. */
  description?: string;
}

/**
 * Options of `signal.once`. Defaults: `retries: 3`, `deadLetter: true`,
 * `optional: false`, `schema` none, `description` the signal's name.
 */
export interface OnceOptions<P> extends SignalOptionsBase<P> {
  /** Extra attempts after the first: `retries + 1` invocations in total. Default `3`. */
  retries?: number;
  /** Keep exhausted messages as `dead` (`true`) or mark them `delivered` (`false`). Default `true`. */
  deadLetter?: boolean;
}

/** Options of `signal.broadcast`. Defaults: `optional: false`, `schema` none, `description` the signal's name. */
export type BroadcastOptions<P> = SignalOptionsBase<P>;

/**
 * Options of `signal.live`. Defaults: `retention: "24h"`, `schema` none,
 * `description` the signal's name (`optional` changes nothing: the tape is its own subscriber).
 */
export interface LiveOptions<P> extends SignalOptionsBase<P> {
  /** How long entries stay on the tape for readers resuming, e.g. `"1h"` (grammar as fx.clock.sleep). Default `"24h"`. */
  retention?: string;
}

export type Delivery = "once" | "broadcast" | "live";

interface SignalBase<P, D extends Delivery> {
  readonly kind: "signal";
  readonly delivery: D;
  readonly name: string;
  readonly schema: Schema<P> | undefined;
  readonly optional: boolean;
  readonly description: string;
  /** Phantom: the payload type, for inference only. */
  readonly __payload?: P;
}

export interface OnceSignal<P = unknown> extends SignalBase<P, "once"> {
  readonly retries: number;
  readonly deadLetter: boolean;
}
export type BroadcastSignal<P = unknown> = SignalBase<P, "broadcast">;
export interface LiveSignal<P = unknown> extends SignalBase<P, "live"> {
  readonly retention: string | undefined;
}
export type SignalHandle<P = unknown> = OnceSignal<P> | BroadcastSignal<P> | LiveSignal<P>;
export type PayloadOf<S> = S extends SignalBase<infer P, Delivery> ? P : never;

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

function once<P = unknown>(name: string, options: OnceOptions<P> = {}): OnceSignal<P> {
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

function broadcast<P = unknown>(name: string, options: BroadcastOptions<P> = {}): BroadcastSignal<P> {
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

function live<P = unknown>(name: string, options: LiveOptions<P> = {}): LiveSignal<P> {
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
