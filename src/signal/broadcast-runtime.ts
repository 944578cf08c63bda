/** Fleet-wide broadcast delivery: subscriber heartbeats, one queued copy per subscribed flow, copy workers, the janitor. */
import type { Clock } from "../clock/clock.ts";
import { OkeError } from "../errors.ts";
import type { JournalSession } from "../durable/session.ts";
import type { AnyFlow } from "../flow/flow.ts";
import type { Logger } from "../log/logger.ts";
import type { BroadcastSubscription } from "../store/fanout-types.ts";
import type { ClaimedMessage, NewMessage, Store } from "../store/types.ts";
import { LEASE_EXPIRED, leaseSeconds } from "./attempt-budget.ts";
import { prepareEmit } from "./emit.ts";
import type { BroadcastSignal, OnceSignal, SignalHandle } from "./signal.ts";
import { WorkerPool, type HandlerOutcome } from "./worker-pool.ts";

/**
 * The physics, in one place (docs/signals.md "broadcast" repeats them):
 * - an instance announces the broadcast flows it runs every HEARTBEAT_MS, and
 *   counts as running them until SUBSCRIBER_TTL_MS after its last heartbeat;
 * - an emitter makes one copy per (signal, flow) it knows a live subscriber of
 *   (its own flows, plus the fleet's as last read, at most REFRESH_MS old);
 * - a copy waits in the queue for an instance with its flow at most
 *   MAX_WAIT_MS; older copies are dropped as missed, and the copies of a flow
 *   whose every subscriber lapsed are cleared by the janitor;
 * - a heartbeat that failed (store unreachable) is retried every RETRY_MS, and
 *   at once on the store's wake-up, so an instance re-announces its flows as
 *   soon as the store is back;
 * - an outage does not count against a subscriber's TTL: after this
 *   instance's own store calls failed, the subscribers it last saw before the
 *   outage still count (and the janitor waits) for SUBSCRIBER_TTL_MS from the
 *   first read that succeeds again. Their entries expired only because nobody
 *   could heartbeat meanwhile.
 */
export const BROADCAST_PHYSICS = {
  HEARTBEAT_MS: 5_000,
  SUBSCRIBER_TTL_MS: 15_000,
  REFRESH_MS: 1_000,
  MAX_WAIT_MS: 30_000,
  RETRY_MS: 1_000,
} as const;

const JANITOR_BATCH = 500;

/** Failure code of a broadcast copy claimed after it waited longer than MAX_WAIT_MS: recorded, not run. */
export const BROADCAST_MISSED = "MISSED";

/** The queue that holds one flow's copies of a broadcast signal's events. */
export const broadcastQueue = (signal: string, flow: string): string => `~broadcast:${signal}:${flow}`;

/** A copy's id is `<event id>/<flow>`: the event id is what the logs name. */
const eventIdOf = (copyId: string): string => {
  const i = copyId.indexOf("/");
  return i === -1 ? copyId : copyId.slice(0, i);
};

export interface BroadcastRuntimeOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** This instance's holder id. */
  instanceId: string;
  signals: ReadonlyMap<string, SignalHandle>;
  subscribers: ReadonlyMap<string, readonly AnyFlow[]>;
  /**
   * The flows the app's code binds to each broadcast, whether or not this instance runs them (a
   * `web` instance runs none): an emit nobody in the fleet runs says they are bound but not running,
   * rather than "no subscriber". Default: `subscribers`.
   */
  bound?: ReadonlyMap<string, readonly AnyFlow[]>;
  concurrency: number;
  leaseMs: number;
  /** Runs one claimed copy through its flow, as a once consumer would (the app's handler). */
  handler(queue: OnceSignal, flow: AnyFlow): (m: ClaimedMessage) => Promise<HandlerOutcome>;
}

/**
 * OKE1240 for a broadcast whose flows the code binds but no instance runs (every instance `web`, or
 * the workers down for 15 s): "no subscriber… Add on(signal, …)" sent users to bind what was bound.
 */
const broadcastNotRunning = (producer: string, signal: string, bound: readonly AnyFlow[]): OkeError =>
  new OkeError({
    code: "OKE1240",
    message: `Flow "${producer}" emits broadcast signal "${signal}", whose flows (${bound
      .map((f) => f.name ?? "?")
      .join(", ")}) no instance of the fleet runs now.`,
    fix: "Run an instance with role all or worker (a web instance runs no broadcast flows; one that stopped counts for 15 s after its last heartbeat), or declare the signal optional: true so events no instance runs are missed.",
    status: 500,
  });

export interface BroadcastProducer {
  flow: string;
  runId: string | null;
}

export class BroadcastRuntime {
  private readonly pools: WorkerPool[] = [];
  /** (signal, flow) pairs this instance runs. */
  private readonly own: BroadcastSubscription[] = [];
  /** signal → flows known to have a live subscriber (ours included). */
  private fleet = new Map<string, Set<string>>();
  private fleetReadAt = -Infinity;
  /** The fleet as last read before this instance's store calls failed: held over an outage. */
  private known = new Map<string, Set<string>>();
  /** A store call failed since the last fleet read that succeeded. */
  private outage = false;
  /** Until then `known` still counts and the janitor waits (the grace after an outage). */
  private holdUntil = -Infinity;
  /** The last heartbeat failed: retried every RETRY_MS and on the store's wake-up. */
  private tickFailed = false;
  /** Per flow: when a missed copy was last logged at warn, and how many were missed since (logMissed). */
  private readonly missedLog = new Map<string, { warnedAt: number; since: number }>();
  private unsubscribe: (() => void) | undefined;
  private refreshing: Promise<void> | undefined;
  private cancelTick: (() => void) | undefined;
  private tickRunning: Promise<void> | undefined;
  /** start() in flight (its first heartbeat), so stop() can wait for it. */
  private starting: Promise<void> | undefined;
  /**
   * Set by stop(): a heartbeat or janitor round awaiting the store when it came goes no further
   * (its next step would read the clock after the stop), and a start awaiting its heartbeat starts
   * no copy worker.
   */
  private stopped = false;

  constructor(private readonly o: BroadcastRuntimeOptions) {
    for (const [signal, flows] of o.subscribers) {
      if (o.signals.get(signal)?.delivery !== "broadcast") continue;
      for (const f of flows) this.own.push({ signal, flow: f.name! });
    }
  }

  /** True when this app binds or may emit broadcast signals (the runtime has work). */
  get used(): boolean {
    return [...this.o.signals.values()].some((s) => s.delivery === "broadcast");
  }

  /** Announces this instance's flows, reads the fleet's, and starts a copy worker per own flow. */
  start(): Promise<void> {
    if (!this.used || this.stopped) return Promise.resolve();
    this.starting = this.startWorkers().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async startWorkers(): Promise<void> {
    await this.heartbeat();
    // Stopped while the first heartbeat was out: no worker starts (nobody would stop it).
    if (this.stopped) return;
    for (const [signal, flows] of this.o.subscribers) {
      const s = this.o.signals.get(signal);
      if (s?.delivery !== "broadcast") continue;
      for (const flow of flows) {
        const queue: OnceSignal = {
          kind: "signal",
          delivery: "once",
          name: broadcastQueue(signal, flow.name!),
          schema: undefined,
          optional: true,
          description: `${s.description} → ${flow.name!}`,
          // Ephemeral: one attempt; a failure is logged here and the copy is done (delivered, with
          // its failure recorded: deadLetter false).
          retries: 0,
          deadLetter: false,
        };
        const pool = new WorkerPool({
          store: this.o.store,
          clock: this.o.clock,
          logger: this.o.logger,
          signal: queue,
          worker: this.o.instanceId,
          concurrency: this.o.concurrency,
          // No prefetch: a copy is claimed only into a free slot and its handler starts at once, so
          // a claim is spent only by a copy that started. A prefetched copy left in the buffer of an
          // instance that died came back spent (one attempt) and was never run anywhere.
          // The cost: under a backlog, up to one claim per finished handler instead of one per
          // prefetch/2 copies; an idle fleet claims once per event either way.
          prefetch: 0,
          leaseMs: this.o.leaseMs,
          handle: this.copyHandler(s, flow, this.o.handler(queue, flow)),
          // A claim that finds the one attempt spent: the handler that held it was cut off.
          whenSpent: (m, unstarted) => Promise.resolve(this.cutOff(s, flow, m, unstarted)),
          whenSpentSays: "that claim settles the copy as cut off, without running it again",
          // Broadcast is ephemeral: a copy a stop cut short is not run again (docs/signals.md), so its
          // claim is left spent, as a crash leaves it, and the next claim settles it as cut off.
          cutAtStop: "spent",
        });
        this.pools.push(pool);
        pool.start();
      }
    }
    // The store's wake-up (poll tick, reconnect) retries a failed heartbeat at once.
    this.unsubscribe = this.o.store.subscribe((e) => {
      if (e.kind === "wake" && this.tickFailed) this.runTick();
    });
    this.armTick(BROADCAST_PHYSICS.HEARTBEAT_MS);
  }

  /**
   * A copy whose one attempt is spent: its handler started on an instance that died (or outlived its
   * lease), so it is settled unrun. `unstarted` (a copy dropped from the buffer) cannot happen without
   * prefetch; should it, the pool settles it with its never-started text.
   */
  private cutOff(
    signal: BroadcastSignal,
    flow: AnyFlow,
    m: ClaimedMessage,
    unstarted: { code: string; message: string } | undefined,
  ): HandlerOutcome | undefined {
    if (unstarted !== undefined) return undefined;
    const attempt = m.attempts - 1;
    this.o.logger.warn(
      { signal: signal.name, flow: flow.name, eventId: eventIdOf(m.id), attempt },
      "broadcast: a handler was cut off (its instance stopped, or it outlived its lease); not run again",
    );
    // Recorded as the copy's failure, for the attempt that was cut off: the copy did not run to its
    // end, and the Console counts it among the failed rather than plainly delivered.
    return {
      kind: "error",
      failure: {
        code: LEASE_EXPIRED,
        message: `cut off: the handler of "${flow.name!}" started on an instance that stopped or died, or outlived its lease (${leaseSeconds(this.o.leaseMs)}); a broadcast copy is not run again`,
      },
      attempt,
      final: true,
      logged: true,
    };
  }

  private copyHandler(
    signal: BroadcastSignal,
    flow: AnyFlow,
    run: (m: ClaimedMessage) => Promise<HandlerOutcome>,
  ): (m: ClaimedMessage) => Promise<HandlerOutcome> {
    return async (m) => {
      const log = { signal: signal.name, flow: flow.name, eventId: eventIdOf(m.id) };
      const age = this.o.clock.now() - m.createdAt;
      if (age > BROADCAST_PHYSICS.MAX_WAIT_MS) {
        this.logMissed(flow.name!, { ...log, ageMs: age });
        // Not run, so recorded as the copy's failure: the Console counts it among the failed.
        return {
          kind: "error",
          failure: {
            code: BROADCAST_MISSED,
            message: `missed: the event waited ${Math.round(age / 1000)} s for "${flow.name!}", over the ${BROADCAST_PHYSICS.MAX_WAIT_MS / 1000} s a broadcast copy waits; not run`,
          },
          final: true,
          logged: true,
        };
      }
      const out = await run(m);
      if (out.kind === "error") {
        this.o.logger.error(
          {
            ...log,
            code: out.failure.code,
            err: out.cause instanceof Error ? out.cause : out.failure.message,
          },
          `broadcast handler failed: ${out.failure.message}`,
        );
        // Settled with its failure: the copy queue has no retry and no dead letter, so the pool marks
        // it `delivered` with the failure recorded, which the Console and `oke status` count as failed.
        // The line above is the one: the pool adds no "attempt 1 failed" of its own.
        return { ...out, final: true, logged: true };
      }
      return out;
    };
  }

  /**
   * A missed copy's log line: the first of a flow at warn, the others of the next MAX_WAIT_MS at debug
   * and counted into the next warn line. A backlog that waited out an outage is missed copy by copy,
   * and one line per copy was thousands of lines (each copy is recorded as MISSED all the same).
   */
  private logMissed(flow: string, fields: Record<string, unknown>): void {
    const now = this.o.clock.now();
    const seen = this.missedLog.get(flow);
    if (seen !== undefined && now - seen.warnedAt < BROADCAST_PHYSICS.MAX_WAIT_MS) {
      seen.since++;
      this.o.logger.debug(fields, "broadcast: event waited too long for this flow; missed");
      return;
    }
    this.missedLog.set(flow, { warnedAt: now, since: 0 });
    this.o.logger.warn(
      { ...fields, ...(seen !== undefined && seen.since > 0 ? { alsoMissedSinceLastLine: seen.since } : {}) },
      "broadcast: event waited too long for this flow; missed" +
        (seen !== undefined && seen.since > 0 ? ` (and ${seen.since} more since the last such line)` : ""),
    );
  }

  private armTick(delayMs: number): void {
    if (this.stopped) return;
    this.cancelTick?.();
    this.cancelTick = this.o.clock.at(this.o.clock.now() + delayMs, () => {
      this.cancelTick = undefined;
      this.runTick();
    });
  }

  /** Heartbeat and janitor now (unless one is running), then the next one armed. */
  private runTick(): void {
    if (this.stopped || this.tickRunning !== undefined) return;
    this.cancelTick?.();
    this.cancelTick = undefined;
    this.tickRunning = this.tick()
      .then(
        () => {
          if (this.tickFailed) this.o.logger.info("broadcast: heartbeat sent again; the store is back");
          this.tickFailed = false;
        },
        (err: unknown) => {
          this.outage = true;
          // One line per outage, not one per retry.
          if (!this.tickFailed)
            this.o.logger.warn(
              { err },
              `broadcast: heartbeat failed; retrying every ${BROADCAST_PHYSICS.RETRY_MS} ms and on reconnect`,
            );
          else this.o.logger.debug({ err }, "broadcast: heartbeat failed again");
          this.tickFailed = true;
        },
      )
      .finally(() => {
        this.tickRunning = undefined;
        this.armTick(this.tickFailed ? BROADCAST_PHYSICS.RETRY_MS : BROADCAST_PHYSICS.HEARTBEAT_MS);
      });
  }

  private async tick(): Promise<void> {
    await this.heartbeat();
    if (this.stopped) return;
    // Right after an outage every subscriber's entry may have lapsed only for want of a reachable
    // store: clearing their copies before they re-announce would lose events they are still there for.
    if (this.o.clock.now() < this.holdUntil) return;
    await this.sweep();
  }

  private async heartbeat(): Promise<void> {
    const now = this.o.clock.now();
    if (this.own.length > 0)
      await this.o.store.heartbeatSubscriptions({
        instance: this.o.instanceId,
        subscriptions: this.own,
        now,
        expiresAt: now + BROADCAST_PHYSICS.SUBSCRIBER_TTL_MS,
      });
    if (this.stopped) return;
    await this.readFleet(now);
  }

  private async readFleet(now: number): Promise<void> {
    let live: BroadcastSubscription[];
    try {
      live = await this.o.store.liveSubscriptions(now);
    } catch (e) {
      this.outage = true;
      throw e;
    }
    const fleet = new Map<string, Set<string>>();
    const add = (signal: string, flow: string): void => {
      let set = fleet.get(signal);
      if (!set) fleet.set(signal, (set = new Set()));
      set.add(flow);
    };
    for (const { signal, flow } of [...this.own, ...live]) add(signal, flow);
    if (this.outage) {
      // The first read after our store calls failed: members' entries may have expired meanwhile
      // only because nobody could heartbeat. Those seen before count for one more TTL.
      this.outage = false;
      this.holdUntil = now + BROADCAST_PHYSICS.SUBSCRIBER_TTL_MS;
    }
    if (now < this.holdUntil) {
      for (const [signal, flows] of this.known) for (const flow of flows) add(signal, flow);
    } else {
      this.known = fleet;
    }
    this.fleet = fleet;
    this.fleetReadAt = now;
  }

  /**
   * Copies of flows nobody runs any more would wait forever: claim them and drop them, once per pair.
   * No claim goes out after stop; a claim that did is settled all the same (its copies were to be
   * dropped, and left leased they would only come back spent).
   */
  private async sweep(): Promise<void> {
    const now = this.o.clock.now();
    const lapsed = await this.o.store.lapsedSubscriptions(now, 20);
    for (const pair of lapsed) {
      let dropped = 0;
      let done = true;
      for (;;) {
        if (this.stopped) {
          done = false;
          break;
        }
        const batch = await this.o.store.claim({
          signal: broadcastQueue(pair.signal, pair.flow),
          worker: this.o.instanceId,
          max: JANITOR_BATCH,
          now,
          leaseMs: this.o.leaseMs,
        });
        if (batch.length === 0) break;
        // Not run, so recorded as each copy's failure (MISSED, as a copy that waited too long): the
        // Console and `oke status` count them among the failed, not as plainly delivered.
        const failure = {
          code: BROADCAST_MISSED,
          message: `missed: no running instance binds "${pair.flow}" any more (its last one stopped heartbeating); not run`,
          at: now,
        };
        await this.o.store.settle(
          batch.map((m) => ({
            id: m.id,
            worker: this.o.instanceId,
            attempt: m.attempts,
            status: "delivered",
            failure: { ...failure, attempt: m.attempts },
          })),
          now,
        );
        dropped += batch.length;
        if (batch.length < JANITOR_BATCH) break;
      }
      if (dropped > 0)
        this.o.logger.warn(
          { signal: pair.signal, flow: pair.flow, dropped },
          "broadcast: no running instance binds this flow any more; its waiting events are missed",
        );
      // Forgotten only once its copies are all dropped: the next janitor (any instance's) goes on.
      if (!done) return;
      await this.o.store.forgetSubscription(pair, pair.expiredAt);
    }
  }

  private flowsOf(signal: string): string[] {
    const set = new Set(this.o.subscribers.get(signal)?.map((f) => f.name!) ?? []);
    for (const f of this.fleet.get(signal) ?? []) set.add(f);
    return [...set];
  }

  /** The fleet's subscribers as read at most REFRESH_MS ago (one read shared by concurrent emits). */
  private async fresh(): Promise<void> {
    if (this.o.clock.now() - this.fleetReadAt < BROADCAST_PHYSICS.REFRESH_MS) return;
    this.refreshing ??= this.readFleet(this.o.clock.now()).finally(() => (this.refreshing = undefined));
    await this.refreshing;
  }

  /**
   * Emits a broadcast: schema and orphan checks (the fleet's subscribers
   * count), then one copy per subscribed flow, committed together — in the
   * run's journal commit when `session` is given, in the caller's transaction
   * with `tx`.
   */
  async emit(
    target: BroadcastSignal,
    payload: unknown,
    options: { key?: string | undefined; id?: string | undefined; tx?: unknown } | undefined,
    producer: BroadcastProducer,
    session?: JournalSession,
  ): Promise<void> {
    await this.fresh();
    const now = this.o.clock.now();
    const flows = this.flowsOf(target.name);
    const event = await prepareEmit(
      { subscriberCount: () => flows.length, now },
      target,
      payload,
      options,
      producer,
    ).catch((e: unknown) => {
      // After every other check, as the subscriber check itself: only its wording changes.
      const bound = (this.o.bound ?? this.o.subscribers).get(target.name) ?? [];
      if (e instanceof OkeError && e.code === "OKE1240" && bound.length > 0)
        throw broadcastNotRunning(producer.flow, target.name, bound);
      throw e;
    });
    const copies: NewMessage[] = flows.map((flow) => ({
      ...event,
      id: `${event.id}/${flow}`,
      signal: broadcastQueue(target.name, flow),
    }));
    if (session) return session.emit(event, copies);
    if (copies.length === 0) return;
    await this.o.store.enqueue(copies, now, options?.tx === undefined ? undefined : { tx: options.tx });
  }

  isIdle(): boolean {
    return this.pools.every((p) => p.isIdle());
  }

  /** Copies (`<event id>/<flow>`) whose handlers this instance has not finished. */
  leftIds(): string[] {
    return this.pools.flatMap((p) => p.leftIds());
  }

  whenIdle(): Promise<unknown> {
    return Promise.all(this.pools.map((p) => p.whenIdle()));
  }

  /** Stops heartbeats and the janitor, waits (up to `timeoutMs`) for the round in flight, then stops the copy workers. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.cancelTick?.();
    // A duration within this process: monotonic, so a host clock step neither cuts nor stretches it.
    const deadline = performance.now() + timeoutMs;
    // A start awaiting its heartbeat, or a tick: each stops at its next step (see `stopped`).
    await withinMs(timeoutMs, Promise.allSettled([this.starting, this.tickRunning]));
    await Promise.all(this.pools.map((p) => p.stop(Math.max(0, Math.ceil(deadline - performance.now())))));
  }
}

/** Waits for `p` at most `ms`. */
async function withinMs(ms: number, p: Promise<unknown> | undefined): Promise<void> {
  if (p === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    p.catch(() => undefined),
    new Promise<void>((r) => {
      timer = setTimeout(r, ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}
