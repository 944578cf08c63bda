/** The fx context handed to a flow body: emit, call, step, send, sleep, using, journaled when durable. */
import type { FxRuntime } from "./runtime.ts";
import type { Channel } from "../channel/channel.ts";
import { parseDuration, type Duration } from "../clock/duration.ts";
import type { UndoList } from "../durable/runner.ts";
import { jsonRoundTrip } from "../durable/journal-value.ts";
import type { JournalSession } from "../durable/session.ts";
import { errors, OkeError } from "../errors.ts";
import { isHandWritten } from "../flow/effects.ts";
import type { AnyFlow, Flow } from "../flow/flow.ts";
import { newId } from "../id.ts";
import { describeIssues, validate } from "../schema.ts";
import { emitContext, prepareEmit } from "../signal/emit.ts";
import { checkIdEmit, checkSameSignal, isDuplicateMessage } from "../signal/emit-once.ts";
import { liveStream, type LiveStream } from "../signal/live-runtime.ts";
import {
  isSignal,
  type EmitInput,
  type LiveSignal,
  type OnceSignal,
  type SignalHandle,
} from "../signal/signal.ts";
import type { Jsonify } from "./jsonify.ts";
import type { ResourceScope } from "./resources.ts";
import { durationText, once, warnAboutSleep } from "./sleep-guards.ts";
import type { DeadLetter, EmitOptions, Fx, FxClock, Resource, StepOptions } from "./types.ts";

/** One invocation of a flow: who runs, which attempt, and (durable) its journal session. */
export interface Frame {
  flow: AnyFlow;
  runId: string;
  attempt: number;
  parentRunId: string | null;
  session?: JournalSession;
  undos?: UndoList;
  scope: ResourceScope;
  /**
   * A plain run whose id is the same on a re-run (a keyed request's recorded run id, a durable
   * parent's call position): its emits and calls take ids derived from it (see FxContext.nextId).
   */
  derivedIds?: boolean;
}

export function createFx(rt: FxRuntime, frame: Frame): Fx {
  return new FxContext(rt, frame);
}

/**
 * The fx handed to a flow body. A class, not a bag of closures: one object per
 * invocation keeps the per-message cost of a queue worker low (measured with
 * bench/app-drain.ts). Call its methods on fx (`fx.emit(...)`).
 */
class FxContext implements Fx {
  readonly flow: string;
  readonly runId: string;
  readonly attempt: number;
  private logger: Fx["log"] | undefined;
  private clockImpl: FxClock | undefined;
  /** Emits and calls made so far: the position a derived id is built from. */
  private position = 0;

  constructor(
    private readonly rt: FxRuntime,
    private readonly frame: Frame,
  ) {
    this.flow = frame.flow.name ?? "(unnamed)";
    this.runId = frame.runId;
    this.attempt = frame.attempt;
  }

  /** Built on first use, like `log`: most queue handlers never read the clock. */
  get clock(): FxClock {
    return (this.clockImpl ??= new FxClockImpl(
      this.rt,
      this.frame.session,
      this.flow,
      this.frame.flow.durable,
    ));
  }

  /** A child logger costs more than a no-op handler: built on first use. */
  get log(): Fx["log"] {
    return (this.logger ??= this.rt.logger.child({ flow: this.flow, runId: this.runId }));
  }

  id(): string {
    const make = (): string => newId(this.rt.clock.now());
    return this.frame.session ? this.frame.session.id(make) : make();
  }

  /**
   * The id of this emit or call in a plain run with derived ids: `<runId>.<position>`, the same
   * when the run runs again with its id (a keyed request taken over after its process died), so
   * the re-run's emits are refused as duplicates (OKE1261, every driver) and its calls find their
   * first runs — as a durable run's journal would. Taken before any await: the position is the
   * order the flow made its calls in, not the order they finish. Undefined otherwise.
   */
  private nextId(): string | undefined {
    return this.frame.derivedIds === true && !this.frame.session
      ? `${this.runId}.${String(this.position++)}`
      : undefined;
  }

  async call<I, O>(target: Flow<I, O>, input: I): Promise<O | undefined> {
    const derived = this.nextId();
    const callee = this.rt.registry.named.get(target) ?? target;
    const run = async (childRunId?: string): Promise<O | undefined> => {
      const r = await this.rt.call(callee, input, { runId: this.runId, flow: this.flow, childRunId });
      return r.kind === "returned" ? (r.value as O) : undefined;
    };
    // A durable parent names the child by its own run and journal position: a replay after a
    // crash between starting the child and journaling the call finds that child, not a second.
    return this.frame.session
      ? this.frame.session.once("call", callee.name ?? "(unnamed)", (seq) => run(`${this.runId}.${seq}`))
      : run(derived);
  }

  using<T extends Resource>(resource: T): T {
    return this.frame.scope.add(resource);
  }

  emit<P>(target: SignalHandle<P>, ...args: unknown[]): Promise<void> {
    return this.emitOne(target, args[0], args[1] as EmitOptions | undefined, this.nextId());
  }

  private async emitOne(
    target: SignalHandle,
    payload: unknown,
    options: EmitOptions | undefined,
    derived: string | undefined,
  ): Promise<void> {
    const { rt } = this;
    if (isSignal(target)) {
      warnUndeclaredEmit(rt, this.frame.flow, target.name);
      if (options?.id !== undefined) checkIdEmit(target);
    }
    // A derived id stands in for a caller-chosen one; the caller's own id wins.
    const opts = derived === undefined || options?.id !== undefined ? options : { ...options, id: derived };
    const chosenId = opts?.id !== undefined;
    if (isSignal(target) && target.delivery !== "once") {
      try {
        // A live tape skips an entry id it holds already; a broadcast's copies are refused together.
        return await rt.emitFanout(
          target,
          payload,
          opts,
          { flow: this.flow, runId: this.runId },
          this.frame.session,
        );
      } catch (e) {
        if (!(chosenId && isDuplicateMessage(e))) throw e;
        return;
      }
    }
    const message = await prepareEmit(emitContext(rt.registry, rt.clock.now()), target, payload, opts, {
      flow: this.flow,
      runId: this.runId,
    });
    if (this.frame.session) await this.frame.session.emit(message, [message], chosenId);
    else
      try {
        await rt.enqueue(message);
      } catch (e) {
        // { id } or a derived id: stored already by an earlier emit — nothing more to enqueue.
        if (!(chosenId && isDuplicateMessage(e))) throw e;
        await checkSameSignal(rt.store, message);
      }
  }

  async deadLetters<P>(target: OnceSignal<P>): Promise<DeadLetter<P>[]> {
    if (typeof target !== "object" || target === null || target.kind !== "signal") {
      throw new TypeError("fx.deadLetters(signal): the argument must be a once signal handle");
    }
    const resource = `signal:${target.name}`;
    if (!this.frame.flow.effects.reads.includes(resource)) throw errors.undeclaredRead(this.flow, resource);
    if (target.delivery !== "once" || !this.rt.registry.subscribers.get(target.name)?.length) {
      throw new OkeError({ code: "OKE1241", message: "fx.deadLetters requires a bound signal runtime" });
    }
    const rows = await this.rt.store.deadLetters(target.name);
    return rows.map((m) => ({
      id: m.id,
      payload: m.payload as P,
      attempts: m.attempts,
      failures: m.failures,
      key: m.key,
      createdAt: m.createdAt,
      status: "dead" as const,
    }));
  }

  async step<T>(name: string, fn: () => Promise<T> | T, options?: StepOptions<T>): Promise<Jsonify<T>> {
    const { session } = this.frame;
    // Not durable: nothing to journal, but the value comes back through JSON as a durable step's
    // does (Jsonify<T>), so making a flow durable changes nothing its code sees.
    if (!session)
      return jsonRoundTrip(await fn(), `step ${JSON.stringify(name)} of flow "${this.flow}"`) as Jsonify<T>;
    // The session hands back the journaled JSON (every attempt, the first included).
    const value = (await session.step(name, fn)).value as Jsonify<T>;
    const undo = options?.undo;
    if (undo) this.frame.undos?.push({ name, run: () => undo(value) });
    return value;
  }

  live<P>(target: LiveSignal<P>, options?: { key?: string }): LiveStream<P> {
    return liveStream(target, options, this.flow);
  }

  async send<P, In>(target: Channel<P, In>, payload: EmitInput<P, In>): Promise<void> {
    if (typeof target !== "object" || target === null || target.kind !== "channel") {
      throw new TypeError("fx.send(channel, payload): the first argument must be a channel");
    }
    let value: unknown = payload;
    if (target.schema) {
      const r = await validate(target.schema, payload);
      if (!r.ok)
        throw new OkeError({
          code: "OKE1265",
          message: `"${target.name}": ${describeIssues(r.issues)}`,
          details: r.issues,
        });
      value = r.value;
    }
    const deliver = (): Promise<void> => this.rt.send.send(target, value, this.rt.clock.now());
    if (this.frame.session) await this.frame.session.once("send", target.name, deliver);
    else await deliver();
  }
}

/**
 * An emit of a signal the flow's hand-written `effects.emits` leaves out: the Manifest and the Console
 * show that list as what the flow emits, so it has gone stale. Warned once per app, flow and signal, not
 * refused: the emit itself is fine. Not checked: effects recorded from the source (a handle the
 * parser cannot follow is legitimately missing from them), nor a flow that wrote other lists by
 * hand but no `emits` (e.g. only `reads`, for fx.deadLetters).
 */
function warnUndeclaredEmit(rt: FxRuntime, flow: AnyFlow, signal: string): void {
  const effects = flow.effects;
  if (!isHandWritten(effects, "emits") || effects.emits.includes(signal)) return;
  if (!once(rt, `undeclared emit ${flow.name ?? ""} ${signal}`)) return;
  rt.logger.warn(
    { flow: flow.name, signal, declared: effects.emits },
    `flow "${flow.name ?? "(unnamed)"}" emitted "${signal}", which its hand-written effects.emits (${effects.emits.length === 0 ? "empty" : effects.emits.map((e) => `"${e}"`).join(", ")}) leaves out: the Manifest and the Console do not show it. Add it to effects.emits, or drop the effects option to have oke record them from the source`,
  );
}

class FxClockImpl implements FxClock {
  constructor(
    private readonly rt: FxRuntime,
    private readonly session: JournalSession | undefined,
    private readonly flow: string,
    private readonly durable: boolean,
  ) {}

  now(): number {
    return this.rt.clock.now();
  }

  ago(duration: Duration | number): number {
    return this.rt.clock.now() - parseDuration(duration);
  }

  fromNow(duration: Duration | number): number {
    return this.rt.clock.now() + parseDuration(duration);
  }

  duration(duration: Duration | number): number {
    return parseDuration(duration);
  }

  async sleep(label: string, duration?: string): Promise<void> {
    if (typeof label !== "string")
      throw new TypeError("fx.clock.sleep(label, duration): label must be a string");
    warnAboutSleep(this.rt, this.flow, this.durable, label, duration);
    if (!this.session) return;
    // Only a string is a duration, as the spec's contract says: anything else plain JavaScript passes
    // (a number, true, an object) waits 0 ms, as warned, and is journaled as text — every driver
    // stores the same string. One argument is the label; the wait is then 0 ms (the documented pitfall).
    const ms = typeof duration === "string" ? parseDuration(duration) : 0;
    await this.session.sleep(label, durationText(duration), ms);
  }
}
