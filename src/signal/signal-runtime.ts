/** Delivery of signals inside one app: a worker pool per once-bound flow, claim at emit, the broadcast and live runtimes. */
import type { Clock } from "../clock/clock.ts";
import type { JournalSession } from "../durable/session.ts";
import { errorRecord, JournalLeaseBusy } from "../errors.ts";
import type { AnyFlow } from "../flow/flow.ts";
import type { Logger } from "../log/logger.ts";
import type { ClaimedMessage, NewMessage, Store } from "../store/types.ts";
import { BroadcastRuntime } from "./broadcast-runtime.ts";
import { LiveRuntime } from "./live-runtime.ts";
import type { BroadcastSignal, LiveSignal, OnceSignal, SignalHandle } from "./signal.ts";
import { WorkerPool, type HandlerOutcome, type SlotReservation } from "./worker-pool.ts";

const OK: HandlerOutcome = Object.freeze({ kind: "ok" });
const ran = (): HandlerOutcome => OK;
/** A plain consumer's attempt failed; another instance holding the run leaves the message to its lease. */
const failed = (e: unknown): HandlerOutcome =>
  e instanceof JournalLeaseBusy
    ? { kind: "abandon", runId: e.runId }
    : { kind: "error", failure: errorRecord(e), cause: e };

/** How the signal runtime runs flows; the app wires it to fx and to the durable runtime. */
export interface SignalFlowRunner {
  /** One attempt of a flow body that keeps no journal (a plain consumer, a broadcast subscriber). */
  execute(
    flow: AnyFlow,
    input: unknown,
    frame: { runId: string; attempt: number; parentRunId: string | null },
  ): Promise<unknown>;
  /** One delivery of a claimed message to a durable consumer (its run id is the message id). */
  deliverDurable(flow: AnyFlow, message: ClaimedMessage, retryable: boolean): Promise<HandlerOutcome>;
  /**
   * A claim of a durable consumer's message past its attempt budget: what its run says (settle with
   * it, or leave the message while another instance holds the run), or `undefined` to dead-letter it
   * with LEASE_EXPIRED as for any consumer. `unstarted`: the message's last attempt was this claim,
   * dropped from the buffer unrun (WorkerPoolOptions.whenSpent).
   */
  spentDurable(
    flow: AnyFlow,
    message: ClaimedMessage,
    unstarted?: { code: string; message: string },
  ): Promise<HandlerOutcome | undefined>;
}

export interface SignalRuntimeOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Holder id stamped into lockedBy. */
  worker: string;
  signals: ReadonlyMap<string, SignalHandle>;
  /** Signal name → the flows bound to it (a once signal has exactly one). */
  subscribers: ReadonlyMap<string, readonly AnyFlow[]>;
  concurrency: number;
  prefetch: number;
  leaseMs: number;
  /** Insert an unkeyed emit already claimed when a local slot is free (Store.enqueueClaimed). */
  claimAtEmit: boolean;
  /**
   * Run the app's consumers (default true). `false` (a web instance): no once pool, no broadcast
   * subscription announced or consumed; emits still go out, a broadcast's to the fleet's subscribers.
   */
  consume?: boolean;
  runner: SignalFlowRunner;
  /** Wraps the handler of one once signal (the schedule runtime records clock fires this way). */
  wrapHandler?(
    signal: string,
    handle: (m: ClaimedMessage) => Promise<HandlerOutcome>,
  ): (m: ClaimedMessage) => Promise<HandlerOutcome>;
}

/**
 * Owns every worker pool of the app, and the broadcast and live runtimes. The rest of the
 * app talks to it through `enqueue` (a committed once emit, handed to a local
 * slot when it can be) and `emitFanout` (broadcast and live signals); nothing
 * else reaches into a pool.
 */
export class SignalRuntime {
  private readonly pools: WorkerPool[] = [];
  /** start() started the once pools already (a retried start must not start them twice). */
  private poolsStarted = false;
  /** The pool of each once signal bound in this app (claim at emit). */
  private readonly poolBySignal = new Map<string, WorkerPool>();
  private readonly broadcasts: BroadcastRuntime;
  /** Live tapes; the app's SSE hub reads them. */
  readonly lives: LiveRuntime;
  /** Set by stop(): a start still on its way (awaiting the broadcast heartbeat), or called after, starts nothing more. */
  private stopped = false;

  constructor(private readonly o: SignalRuntimeOptions) {
    this.broadcasts = new BroadcastRuntime({
      store: o.store,
      clock: o.clock,
      logger: o.logger,
      instanceId: o.worker,
      signals: o.signals,
      // Not consuming: no subscription of ours to announce or count, only the fleet's.
      subscribers: o.consume === false ? new Map() : o.subscribers,
      bound: o.subscribers,
      concurrency: o.concurrency,
      leaseMs: o.leaseMs,
      handler: (queue, flow) => this.handler(queue, flow),
    });
    this.lives = new LiveRuntime({ store: o.store, clock: o.clock, logger: o.logger, signals: o.signals });
  }

  /**
   * Starts the worker pools, then the broadcast runtime (its first heartbeat is the one store call
   * awaited here), then the live readers. Safe to call again after it failed (boot retries it through
   * a store outage): the pools start once, and a broadcast start that failed started nothing.
   */
  async start(): Promise<void> {
    if (this.stopped) return;
    if (this.o.consume === false) return this.lives.start();
    if (!this.poolsStarted) this.startPools();
    await this.broadcasts.start();
    if (this.stopped) return;
    this.lives.start();
  }

  private startPools(): void {
    this.poolsStarted = true;
    for (const [signalName, flows] of this.o.subscribers) {
      const s = this.o.signals.get(signalName)!;
      if (s.delivery !== "once") continue;
      const pool = new WorkerPool({
        store: this.o.store,
        clock: this.o.clock,
        // Every line of the pool names the flow it runs: an operator looks for the code by it.
        logger: this.o.logger.child({ flow: flows[0]!.name }),
        signal: s,
        worker: this.o.worker,
        concurrency: this.o.concurrency,
        prefetch: this.o.prefetch,
        leaseMs: this.o.leaseMs,
        handle: this.o.wrapHandler?.(signalName, this.handler(s, flows[0]!)) ?? this.handler(s, flows[0]!),
        ...(flows[0]!.durable
          ? {
              whenSpent: (m: ClaimedMessage, unstarted?: { code: string; message: string }) =>
                this.o.runner.spentDurable(flows[0]!, m, unstarted),
            }
          : {}),
      });
      this.pools.push(pool);
      this.poolBySignal.set(signalName, pool);
      pool.start();
    }
  }

  /**
   * Runs one claimed message through its flow. A durable consumer's run id is
   * the message id, so a redelivered message resumes the same run and its
   * completed steps never run again.
   */
  private handler(signal: OnceSignal, flow: AnyFlow): (m: ClaimedMessage) => Promise<HandlerOutcome> {
    const { runner } = this.o;
    if (flow.durable) return (m) => runner.deliverDurable(flow, m, m.attempts <= signal.retries);
    // A promise chain with shared callbacks, not an async arrow: no async frame per message.
    return (m) => {
      try {
        return runner
          .execute(flow, m.payload, { runId: m.id, attempt: m.attempts, parentRunId: m.parentRunId })
          .then(ran, failed);
      } catch (e) {
        return Promise.resolve(failed(e));
      }
    };
  }

  /** Names of the once signals this instance runs a pool for. */
  get onceSignals(): string[] {
    return [...this.poolBySignal.keys()];
  }

  /** Holds a free local slot of `signal`'s pool for a message written already claimed (claim at emit or fire). */
  reserve(signal: string): SlotReservation | undefined {
    return this.poolBySignal.get(signal)?.reserve();
  }

  /** Commits one once message, straight into a free local slot when claim at emit applies. */
  async enqueue(message: NewMessage): Promise<void> {
    const { store, clock } = this.o;
    const slot =
      this.o.claimAtEmit && message.key === null && store.enqueueClaimed !== undefined
        ? this.poolBySignal.get(message.signal)?.reserve()
        : undefined;
    if (slot === undefined) return store.enqueue([message], clock.now());
    let claimed: ClaimedMessage[];
    try {
      claimed = await store.enqueueClaimed!([message], clock.now(), {
        worker: this.o.worker,
        leaseMs: this.o.leaseMs,
      });
    } catch (e) {
      slot.release();
      throw e;
    }
    slot.start(claimed[0]!);
  }

  /** Emits a broadcast (one copy per subscribed flow of the fleet) or appends to a live tape. */
  emitFanout(
    target: BroadcastSignal | LiveSignal,
    payload: unknown,
    options: { key?: string | undefined; id?: string | undefined; tx?: unknown } | undefined,
    producer: { flow: string; runId: string | null },
    session?: JournalSession,
  ): Promise<void> {
    return target.delivery === "broadcast"
      ? this.broadcasts.emit(target, payload, options, producer, session)
      : this.lives.emit(target, payload, options, producer, session);
  }

  /** Handlers of once signals running now. */
  get active(): number {
    return this.pools.reduce((n, p) => n + p.active, 0);
  }

  /** What this instance has not finished: once messages (handlers running or claimed) and broadcast copies. */
  leftIds(): { messages: string[]; broadcasts: string[] } {
    return { messages: this.pools.flatMap((p) => p.leftIds()), broadcasts: this.broadcasts.leftIds() };
  }

  /** True when no pool (once or broadcast) holds work. */
  isIdle(): boolean {
    return this.pools.every((p) => p.isIdle()) && this.broadcasts.isIdle();
  }

  /** Resolves when the pools' work in hand now is done. */
  async whenIdle(): Promise<void> {
    await Promise.all([...this.pools.map((p) => p.whenIdle()), this.broadcasts.whenIdle()]);
  }

  /** Stops claiming and waits for in-flight handlers up to `timeoutMs`. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopped = true;
    await Promise.all([
      ...this.pools.map((p) => p.stop(timeoutMs)),
      this.broadcasts.stop(timeoutMs),
      this.lives.stop(timeoutMs),
    ]);
  }
}
