/** The public types of fx: Fx, FxClock, EmitOptions, StepOptions, DeadLetter, Resource. */
import type { Channel } from "../channel/channel.ts";
import type { Duration } from "../clock/duration.ts";
import type { Flow } from "../flow/flow.ts";
import type { Logger } from "../log/logger.ts";
import type { LiveStream } from "../signal/live-runtime.ts";
import type { EmitInput, LiveSignal, OnceSignal, SignalHandle } from "../signal/signal.ts";
import type { FailureReason } from "../store/types.ts";
import type { Jsonify } from "./jsonify.ts";

/** An emit's arguments: the payload may be left out only when the signal's input allows undefined. */
export type EmitArgs<In, O> = undefined extends In ? [payload?: In, options?: O] : [payload: In, options?: O];

export interface EmitOptions {
  /** Per-key FIFO partition for once signals. */
  key?: string;
  /**
   * A caller-chosen message id (once signals only): a second emit with an id
   * already stored enqueues nothing and resolves as the first did. In a
   * durable flow the emit is journaled as usual, so a replay skips it too.
   */
  id?: string;
}

export interface DeadLetter<P = unknown> {
  id: string;
  payload: P;
  attempts: number;
  failures: FailureReason[];
  key: string | null;
  createdAt: number;
  status: "dead";
}

/** A once message waiting for a worker (OperatorApi.pending). */
export interface PendingMessage<P = unknown> {
  id: string;
  payload: P;
  key: string | null;
  /** Claims made so far: more than 0 for a message retried or released by a stop. */
  attempts: number;
  createdAt: number;
  status: "pending";
}

export interface StepOptions<T> {
  /** Compensation run (LIFO, journaled as `undo:<name>`) if the run later fails; given the step's value as the step resolved it (JSON). */
  undo?: (value: Jsonify<T>) => Promise<void> | void;
}

/** Anything with a dispose or close method, released when the attempt ends. */
export type Resource =
  | { [Symbol.asyncDispose](): PromiseLike<void> }
  | { [Symbol.dispose](): void }
  | { close(): unknown }
  | { release(): unknown }
  | { end(): unknown };

export interface FxClock {
  /** Epoch ms from the app's clock (journaled in durable flows). */
  now(): number;
  /**
   * Durable flows: journal `wakeAt`, park the run and resume after `duration`
   * (`"200ms"`, `"30s"`, `"2m"`, `"8h"`, `"7d"`). Non-durable: resolves at once.
   * The label comes first: `sleep("8h")` would be a label with no wait, so the
   * type requires both; an unknown duration still means 0 ms at run time.
   */
  sleep(label: string, duration: Duration): Promise<void>;
  /** `now() - duration` in epoch ms: `fx.clock.ago("7d")`. Same grammar as sleep. */
  ago(duration: Duration | number): number;
  /** `now() + duration` in epoch ms: `fx.clock.fromNow("1h")`. */
  fromNow(duration: Duration | number): number;
  /** A duration in ms: `fx.clock.duration("2m")` is 120 000. */
  duration(duration: Duration | number): number;
}

/** The effect context: every touch of the outside world goes through it. */
export interface Fx {
  /** Name of the running flow. */
  readonly flow: string;
  /** Id of this run (durable run id, message id, or request id). */
  readonly runId: string;
  /** The message attempt (1-based) for signal consumers, else 1. */
  readonly attempt: number;
  readonly log: Logger;
  readonly clock: FxClock;
  /** A new unique, sortable id (journaled in durable flows). */
  id(): string;
  /**
   * Runs another flow in-process after checking its `in`, resolving with its output. A durable
   * callee (`flow({ durable: true })`) that parks (sleeps) resolves with `undefined`: its result is
   * not there yet, so such a call is typed `O | undefined` (docs/durable.md). A flow whose
   * `durable` is not a literal `true` is typed `O`.
   */
  call<I, O>(target: Flow<I, O, true>, input: I): Promise<O | undefined>;
  call<I, O>(target: Flow<I, O>, input: I): Promise<O>;
  /** Registers a resource to dispose when this attempt ends. Returns it. */
  using<T extends Resource>(resource: T): T;
  /**
   * Enrols a message in the outbox; resolves when it is committed. The payload is the schema's
   * input (defaults may be left out); the handler receives the schema's output as JSON.
   */
  emit<P, In>(target: SignalHandle<P, In>, ...args: EmitArgs<EmitInput<P, In>, EmitOptions>): Promise<void>;
  /** Dead messages of a once signal. Needs `effects.reads: ["signal:<name>"]`. */
  deadLetters<P>(target: OnceSignal<P>): Promise<DeadLetter<P>[]>;
  /**
   * Durable: runs `fn` once and journals its value; replay returns the journaled value. The value
   * comes back through JSON on every attempt, the first included (and in a plain flow too): a
   * `Date` is its ISO string, a `Map` is `{}`, methods are gone (`Jsonify<T>`).
   */
  step<T>(name: string, fn: () => Promise<T> | T, options?: StepOptions<T>): Promise<Jsonify<T>>;
  /** Sends a payload through a channel (schema checked): the schema's input, as for `emit`; the driver gets its output. */
  send<P, In>(target: Channel<P, In>, payload: EmitInput<P, In>): Promise<void>;
  /**
   * The tape of a live signal (of `key`, when given) for the caller of an HTTP
   * flow: return it and the route answers with a `text/event-stream`.
   */
  live<P>(target: LiveSignal<P>, options?: { key?: string }): LiveStream<P>;
}
