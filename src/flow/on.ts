/** on(trigger, flow): binds a flow to an HTTP route or a signal. */
import { isClock, type ClockSchedule } from "../clock/schedule.ts";
import type { SignalHandle } from "../signal/signal.ts";
import { isSignal } from "../signal/signal.ts";
import type { Flow } from "./flow.ts";
import { isFlow } from "./flow.ts";
import type { HttpTrigger } from "./http-trigger.ts";
import { isHttpTrigger } from "./http-trigger.ts";

export type Trigger = HttpTrigger<unknown> | SignalHandle<unknown> | ClockSchedule<unknown>;

export interface Binding<T extends Trigger = Trigger, I = unknown, O = unknown> {
  readonly kind: "binding";
  readonly trigger: T;
  readonly flow: Flow<I, O>;
}

/** Binds a flow to a trigger. The flow's input is the signal's payload, the HTTP input, or the clock's slot. */
// Signals and clocks share one overload: the payload type P comes from the trigger (a clock's is
// ClockInput) before the flow's `do` is typed, so `do: (input) => …` needs no annotation.
export function on<P, O, T extends SignalHandle<P> | ClockSchedule<P> = SignalHandle<P>>(
  trigger: T & (SignalHandle<P> | ClockSchedule<P>),
  f: Flow<P, O>,
): Binding<T, P, O>;
export function on<I, O>(trigger: HttpTrigger<I>, f: Flow<I, O>): Binding<HttpTrigger<I>, I, O>;
export function on(trigger: unknown, f: unknown): Binding {
  if (!isSignal(trigger) && !isHttpTrigger(trigger) && !isClock(trigger)) {
    throw new TypeError(
      "on(trigger, flow): trigger must be a signal handle, an http.* trigger, or a clock (every / clock)",
    );
  }
  if (!isFlow(f)) throw new TypeError("on(trigger, flow): the second argument must be a flow(...)");
  return Object.freeze({ kind: "binding", trigger: trigger, flow: f });
}

export const isBinding = (v: unknown): v is Binding =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "binding";
