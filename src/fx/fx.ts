import type { Runtime } from "../app/runtime.ts";
import type { Channel } from "../channel/channel.ts";
import { parseDuration } from "../clock/duration.ts";
import type { JournalSession } from "../durable/session.ts";
import type { UndoList } from "../durable/runner.ts";
import { errors, OkeError } from "../errors.ts";
import type { AnyFlow, Flow } from "../flow/flow.ts";
import { newId } from "../id.ts";
import { describeIssues, validate } from "../schema.ts";
import { prepareEmit } from "../signal/emit.ts";
import type { OnceSignal, SignalHandle } from "../signal/signal.ts";
import { ResourceScope } from "./resources.ts";
import type { DeadLetter, EmitOptions, Fx, Resource, StepOptions } from "./types.ts";

/** One invocation of a flow: who runs, which attempt, and (durable) its journal session. */
export interface Frame {
  flow: AnyFlow;
  runId: string;
  attempt: number;
  parentRunId: string | null;
  session?: JournalSession;
  undos?: UndoList;
  scope: ResourceScope;
}

export function createFx(rt: Runtime, frame: Frame): Fx {
  const flowName = frame.flow.name ?? "(unnamed)";
  const { session } = frame;
  const log = rt.logger.child({ flow: flowName, runId: frame.runId });

  const emit = async (target: SignalHandle, payload?: unknown, options?: EmitOptions): Promise<void> => {
    const message = await prepareEmit(
      {
        signals: rt.registry.signals,
        subscriberCount: (s) => rt.registry.subscribers.get(s)?.length ?? 0,
        now: rt.clock.now(),
      },
      target,
      payload,
      options,
      { flow: flowName, runId: frame.runId },
    );
    if (target.delivery !== "once") {
      rt.broadcast(target.name, message.payload, frame.runId);
      return;
    }
    if (session) await session.emit(message);
    else await rt.store.enqueue([message], rt.clock.now());
  };

  const fx: Fx = {
    flow: flowName,
    runId: frame.runId,
    attempt: frame.attempt,
    log,
    clock: {
      now: () => rt.clock.now(),
      sleep: async (label: string, duration?: string) => {
        if (typeof label !== "string") throw new TypeError("fx.clock.sleep(label, duration): label must be a string");
        // One argument is the label; the wait is then 0 ms (documented pitfall).
        const text = duration ?? "";
        const ms = parseDuration(text);
        if (!session) return;
        await session.sleep(label, text, ms);
      },
    },
    id: () => (session ? session.id(() => newId(rt.clock.now())) : newId(rt.clock.now())),
    call: async <I, O>(target: Flow<I, O>, input: I): Promise<O> => {
      const callee = rt.registry.named.get(target) ?? (target);
      const run = async (): Promise<O> => {
        const r = await rt.call(callee, input, { runId: frame.runId, flow: flowName });
        return (r.kind === "returned" ? r.value : undefined) as O;
      };
      return session ? session.once("call", callee.name ?? "(unnamed)", run) : run();
    },
    using: <T extends Resource>(r: T): T => frame.scope.add(r),
    emit: emit,
    deadLetters: async <P>(target: OnceSignal<P>): Promise<DeadLetter<P>[]> => {
      if (typeof target !== "object" || target === null || target.kind !== "signal") {
        throw new TypeError("fx.deadLetters(signal): the argument must be a once signal handle");
      }
      const resource = `signal:${target.name}`;
      if (!frame.flow.effects.reads.includes(resource)) throw errors.undeclaredRead(flowName, resource);
      if (target.delivery !== "once" || !rt.registry.subscribers.get(target.name)?.length) {
        throw new OkeError({ code: "OKE1241", message: "fx.deadLetters requires a bound signal runtime" });
      }
      const rows = await rt.store.deadLetters(target.name);
      return rows.map((m) => ({
        id: m.id,
        payload: m.payload as P,
        attempts: m.attempts,
        failures: m.failures,
        key: m.key,
        createdAt: m.createdAt,
        status: "dead" as const,
      }));
    },
    step: async <T>(name: string, fn: () => Promise<T> | T, options?: StepOptions<T>): Promise<T> => {
      if (!session) {
        // Not durable: nothing to journal; the step just runs.
        return await fn();
      }
      const { value } = await session.step(name, fn);
      if (options?.undo) {
        const undo = options.undo;
        frame.undos?.push({ name, run: () => undo(value) });
      }
      return value;
    },
    send: async <P>(target: Channel<P>, payload: P): Promise<void> => {
      if (typeof target !== "object" || target === null || target.kind !== "channel") {
        throw new TypeError("fx.send(channel, payload): the first argument must be a channel");
      }
      let value: unknown = payload;
      if (target.schema) {
        const r = await validate(target.schema, payload);
        if (!r.ok) {
          throw new OkeError({ code: "OKE1265", message: `"${target.name}": ${describeIssues(r.issues)}`, details: r.issues });
        }
        value = r.value;
      }
      const deliver = (): Promise<void> => rt.send.send(target, value, rt.clock.now());
      if (session) await session.once("send", target.name, deliver);
      else await deliver();
    },
  };
  return fx;
}
