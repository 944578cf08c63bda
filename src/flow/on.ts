/** on(trigger, flow): binds a flow to an HTTP route or a signal. */
import { clock, every, isClock, type ClockSchedule } from "../clock/schedule.ts";
import type { BroadcastSignal, OnceSignal, SignalHandle } from "../signal/signal.ts";
import { isSignal } from "../signal/signal.ts";
import type { Flow } from "./flow.ts";
import { isFlow } from "./flow.ts";
import type { HttpTrigger } from "./http-trigger.ts";
import { http, isHttpTrigger } from "./http-trigger.ts";

export type Trigger = HttpTrigger<unknown> | SignalHandle<unknown> | ClockSchedule<unknown>;
/** The triggers whose input is `P`. Not a live signal: it has no worker flows (OKE1078 at boot). */
export type TriggerOf<P> = HttpTrigger<P> | OnceSignal<P> | BroadcastSignal<P> | ClockSchedule<P>;

export interface Binding<T extends Trigger = Trigger, I = unknown, O = unknown> {
  readonly kind: "binding";
  readonly trigger: T;
  readonly flow: Flow<I, O>;
}

/** Binds a flow to a trigger. The flow's input is the signal's payload, the HTTP input, or the clock's slot. */
// One signature for every trigger: TypeScript types an inline `do: (input) => …` against the first
// overload it tries and keeps that type, so with overloads it stayed `unknown` for all but one kind.
// The input type P comes from the trigger before the flow's `do` is typed, so `do: (input) => …`
// needs no annotation. A bare http.* trigger (no `in`) names no input type, so P is the flow's own.
export function on<P, O, T extends TriggerOf<P> = TriggerOf<P>>(
  trigger: T & TriggerOf<P>,
  f: Flow<P, O>,
): Binding<T, P, O>;
export function on(trigger: unknown, f: unknown): Binding {
  if (!isSignal(trigger) && !isHttpTrigger(trigger) && !isClock(trigger)) {
    throw new TypeError(
      "on(trigger, flow): trigger must be a signal handle, an http.* trigger, or a clock (every / clock)" +
        uncalledFactory(trigger),
    );
  }
  if (!isFlow(f)) throw new TypeError("on(trigger, flow): the second argument must be a flow(...)");
  return Object.freeze({ kind: "binding", trigger: trigger, flow: f });
}

/** `on(http.get, …)`: a trigger factory passed without its call, named with the call it needs. */
function uncalledFactory(v: unknown): string {
  if (typeof v !== "function") return "";
  const method = Object.entries(http).find(([, f]) => f === v)?.[0];
  if (method !== undefined) return `; got the function http.${method} itself: did you mean http.${method}()?`;
  if (v === every) return '; got the function every itself: did you mean every("5m")?';
  if (v === clock)
    return '; got the function clock itself: did you mean clock("name", { cron: "0 * * * *" })?';
  return "";
}

export const isBinding = (v: unknown): v is Binding =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "binding";
