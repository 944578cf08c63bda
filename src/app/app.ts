/** The public App: a composition root that wires config, store, the signal and durable runtimes, and HTTP. */
import { hostname } from "node:os";
import { resolve } from "node:path";
import { systemClock, type Clock } from "../clock/clock.ts";
import { FleetClock } from "../clock/fleet-clock.ts";
import { processClock } from "../clock/process-clock.ts";
import { createScheduleOperator } from "../clock/schedule-operator.ts";
import { ScheduleRuntime } from "../clock/schedule-runtime.ts";
import { startConsole, startHeartbeat, type ConsoleServer, type Heartbeat } from "../console/index.ts";
import { warnStrandedWork } from "../console/stranded-work.ts";
import { checkFleetEnv } from "./fleet-env.ts";
import { DurableRuntime, durableConsumers, type WakeEarlyResult } from "../durable/durable-runtime.ts";
import { RunRetention } from "../durable/run-retention.ts";
import { OkeError } from "../errors.ts";
import type { AnyFlow, Flow, InvokeResult } from "../flow/flow.ts";
import { checkInput, executeFlow } from "../fx/execute.ts";
import type { FxRuntime } from "../fx/runtime.ts";
import type { DeadLetter, EmitArgs, EmitOptions, PendingMessage } from "../fx/types.ts";
import { SendDrivers } from "../fx/send.ts";
import { createHttpHandler, type HttpApp } from "../http/handler.ts";
import { toRequest } from "../http/in-process.ts";
import { routeInput } from "../http/request-input.ts";
import { startHttpServer, type HttpServer } from "../http/server.ts";
import type { HttpRoute, Readiness, RouteRequest } from "../http/types.ts";
import { newId } from "../id.ts";
import { createLogger, type Logger } from "../log/logger.ts";
import { emitContext, prepareEmit } from "../signal/emit.ts";
import { emitOnce } from "../signal/emit-once.ts";
import { checkRunInput } from "../signal/storable.ts";
import type { LiveListener, LiveOptionsRead } from "../signal/live-runtime.ts";
import { SseHub } from "../http/sse.ts";
import {
  isSignal,
  type EmitInput,
  type LiveSignal,
  type OnceSignal,
  type SignalHandle,
} from "../signal/signal.ts";
import { SignalRuntime } from "../signal/signal-runtime.ts";
import type { NewMessage, Store } from "../store/types.ts";
import {
  checkRole,
  resolveConfig,
  resolveEnv,
  type Env,
  type InstanceRole,
  type ResolvedConfig,
} from "./config.ts";
import { namedParams } from "./file-routes.ts";
import { buildRegistry, type Manifest, type Registry } from "./manifest.ts";
import { openStore } from "./open-store.ts";
import { createOperatorApi } from "./operator.ts";
import { checkCreateAppOptions, type App, type CreateAppOptions, type OperatorApi } from "./types.ts";
import { warnUnconsumedSignals } from "./declaration-checks.ts";
import { logServes, logStopped } from "./lifecycle-log.ts";
import { openStoreWaiting, storeStepWaiting } from "./store-wait.ts";

/** Builds an app from the bindings its modules export. Throws boot errors (OKE10xx) at once. */
export function createApp(options: CreateAppOptions): App {
  return new OkeApp(options);
}

// Taken when this module loads: a test that installs fake timers (vi.useFakeTimers) afterwards must
// not stop idle()'s own waits from ever firing (it hung past its OKE1099 deadline).
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const realSetImmediate = globalThis.setImmediate;

/** The boot line of an instance that runs part of the app (instance.role). */
const ROLE_LINES: Record<Exclude<InstanceRole, "all">, string> = {
  web: "okengine role web: serves HTTP and emits; runs no workers, durable wakes, schedules or retention sweeps (worker instances do)",
  worker:
    "okengine role worker: runs workers, durable wakes, schedules and retention sweeps; HTTP answers only /_/health and /_/ready",
};

/** The part of the manifest an instance of `role` serves, for the boot line that lists it. */
const servedBy = (manifest: Manifest, role: Exclude<InstanceRole, "all">): Manifest =>
  role === "worker" ? { ...manifest, routes: [] } : { ...manifest, signals: [], clocks: [] };

const STORE_UNAVAILABLE: Readiness = Object.freeze({ ready: false, reason: "store_unavailable" });

/** `draining`: stop() was called; `/_/ready` answers 503 while everything else still serves (http.drainDelayMs). */
type State = "new" | "booting" | "orphan_scan" | "ready" | "draining" | "stopping" | "stopped";

/**
 * Wires one app: config and registry, the store, the signal runtime (worker
 * pools, claim at emit, broadcast), the durable runtime (runs, resumes, wake
 * scheduler), the schedule runtime (clocks) and HTTP. It implements FxRuntime, the narrow surface fx calls.
 */
class OkeApp implements App, FxRuntime {
  readonly env: Env;
  /** What this instance runs (instance.role): a web one consumes nothing, a worker one serves no routes. */
  readonly role: InstanceRole;
  readonly config: ResolvedConfig;
  readonly registry: Registry;
  readonly manifest: Manifest;
  readonly logger: Logger;
  readonly clock: Clock;
  private readonly fleetClock: FleetClock | undefined;
  private readonly retention: RunRetention;
  readonly store: Store;
  readonly send: SendDrivers;
  readonly instanceId: string;
  readonly operator: OperatorApi;
  private state: State = "new";
  /** The stop in progress (or done): every stop() call after the first waits for it. */
  private stopping: Promise<void> | undefined;
  /** Ends the drain now (a stop() with `drainMs: 0` while draining). */
  private endDrain: (() => void) | undefined;
  private bootPromise: Promise<void> | undefined;
  /** The store's open (with boot's wait), shared by boot and an app.emit() before it. */
  private storeOpening: Promise<void> | undefined;
  /** Boot is waiting for an unreachable store (readiness: store_unavailable). */
  private waitingForStore = false;
  /** Resolved by stop(): ends boot's wait for the store. */
  private resolveStopped: (() => void) | undefined;
  private readonly stopped = new Promise<void>((r) => (this.resolveStopped = r));
  private readonly signals: SignalRuntime;
  private readonly durable: DurableRuntime;
  private readonly schedules: ScheduleRuntime;
  readonly sse: SseHub;
  /** The retention prune in flight, if any. */
  private readonly tasks = new Set<Promise<unknown>>();
  /** In-process requests (app.request) not answered yet: idle() waits for them too. */
  private readonly requests = new Set<Promise<unknown>>();
  private server: HttpServer | undefined;
  private cancelPrune: (() => void) | undefined;
  private consoleServer: ConsoleServer | undefined;
  private heartbeat: Heartbeat | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  private httpHandler: ReturnType<typeof createHttpHandler> | undefined;
  /** A store passed in by the caller is theirs to close. */
  private readonly ownsStore: boolean;
  /** The project directory (createApp's `root`): the file store's `.oke/` is in it, and the Console names it. */
  readonly root: string;
  /** "METHOD path" → route, so a request costs one map lookup. */
  private readonly routeIndex: Map<string, Registry["routes"][number]>;

  constructor(options: CreateAppOptions) {
    checkCreateAppOptions(options);
    this.env = resolveEnv(options.env);
    this.config = resolveConfig(options.config, this.env, process.env, {
      storeGiven: options.store !== undefined,
    });
    this.role =
      options.role === undefined ? this.config.role : checkRole("createApp({ role })", options.role);
    this.registry = buildRegistry(options.modules);
    this.manifest = this.registry.manifest;
    // A worker instance serves none of the app's routes (its HTTP answers only /_/health and /_/ready).
    this.routeIndex = new Map(
      this.role === "worker" ? [] : this.registry.routes.map((r) => [`${r.method} ${r.path}`, r]),
    );
    this.logger =
      options.logger ??
      createLogger({ format: this.env === "dev" ? "pretty" : this.env === "prod" ? "json" : "silent" });
    warnUnconsumedSignals(this.registry, this.logger);
    this.ownsStore = options.store === undefined;
    this.root = options.root ?? process.cwd();
    this.store = options.store ?? openStore(this.config, this.root, this.logger);
    // On PostgreSQL the whole fleet reads the database's clock; a caller's clock (time travel) wins.
    // Elsewhere the process is its own fleet: its clock advances on the monotonic clock, so a host
    // clock step neither expires the leases of handlers in flight nor holds timers back.
    const storeTime = this.store.storeTime?.bind(this.store);
    this.fleetClock =
      options.clock === undefined && storeTime !== undefined
        ? new FleetClock(systemClock, storeTime, this.logger)
        : undefined;
    this.clock = options.clock ?? this.fleetClock ?? processClock;
    this.send = new SendDrivers(this.config.send, this.logger, this.registry.channels.values());
    this.instanceId = `${hostname()}:${process.pid}:${newId().slice(-6)}`;
    this.durable = new DurableRuntime({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      instanceId: this.instanceId,
      leaseMs: this.config.durableLeaseMs,
      concurrency: this.config.durableConcurrency,
      maxRecoveries: this.config.durableMaxRecoveries,
      flows: this.registry.flows,
      execute: (flow, input, frame) => executeFlow(this, flow, input, frame),
      consumers: durableConsumers(this.registry.signals, this.registry.subscribers),
    });
    this.signals = new SignalRuntime({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      worker: this.instanceId,
      signals: this.registry.signals,
      subscribers: this.registry.subscribers,
      concurrency: this.config.concurrency,
      prefetch: this.config.prefetch,
      leaseMs: this.config.leaseMs,
      claimAtEmit: this.config.claimAtEmit,
      consume: this.consumes,
      runner: {
        execute: (flow, input, frame) => executeFlow(this, flow, input, frame),
        deliverDurable: (flow, m, retryable) => this.durable.deliver(flow, m, retryable),
        spentDurable: (flow, m, unstarted) => this.durable.deliverSpent(flow, m, unstarted),
      },
      wrapHandler: (signal, handle) => this.schedules.handlerFor(signal, handle),
    });
    this.retention = new RunRetention({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      retentionMs: this.config.durableRetentionMs,
    });
    this.schedules = new ScheduleRuntime({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      clocks: [...this.registry.clocks.values()],
      // The app clock already is fleet time on PostgreSQL (a second FleetTime would only re-measure
      // it), the process clock elsewhere: neither moves, nor delays its timers, when the host clock steps.
      fleetTime: false,
      ...(this.config.claimAtEmit
        ? {
            claimAtFire: {
              worker: this.instanceId,
              leaseMs: this.config.leaseMs,
              reserve: (signal: string) => this.signals.reserve(signal),
            },
          }
        : {}),
    });
    this.operator = {
      ...createOperatorApi(this),
      schedules: createScheduleOperator(this.store, this.schedules),
    };
    this.sse = new SseHub(
      this.signals.lives,
      {
        maxConnections: this.config.liveMaxConnections,
        maxBufferBytes: this.config.liveMaxBufferBytes,
        heartbeatMs: this.config.liveHeartbeatMs,
      },
      this.logger,
    );
  }

  /** Whether this instance runs the background work: worker pools, durable wakes, schedules, retention. */
  private get consumes(): boolean {
    return this.role !== "web";
  }

  /** What the HTTP layer serves: the app itself, or for a worker instance the app without its routes. */
  private httpApp(): HttpApp {
    if (this.role !== "worker") return this;
    return {
      logger: this.logger,
      manifest: { routes: [], flows: this.manifest.flows },
      invokeRoute: (route, request, options) => this.invokeRoute(route, request, options),
      readiness: () => this.readiness(),
      store: this.store,
      clock: this.clock,
      config: this.config,
      sse: this.sse,
    };
  }

  /** Sent messages captured by the memory send driver (tests). */
  get sent() {
    return this.send.sent;
  }

  readiness(): Readiness {
    if (this.state === "ready") return this.store.health().ok ? { ready: true } : STORE_UNAVAILABLE;
    if (this.state === "draining" || this.state === "stopping" || this.state === "stopped")
      return { ready: false, reason: "stopping" };
    // Boot (the orphan scan included) or an early emit waiting through an outage: the store is why.
    if (this.waitingForStore) return STORE_UNAVAILABLE;
    if (this.state === "orphan_scan") return { ready: false, reason: "orphan_scan" };
    return { ready: false, reason: "booting" };
  }

  boot(): Promise<void> {
    this.bootPromise ??= this.doBoot();
    return this.bootPromise;
  }

  /**
   * The store's open, waiting for an unreachable store (openStoreWaiting): one for boot and for an
   * app.emit() before boot, so an early emit waits (and fails) as boot does. A failed wait is
   * forgotten: a later emit tries again (boot keeps its own outcome).
   */
  private openStore(): Promise<void> {
    this.storeOpening ??= (async () => {
      try {
        // open() is told who opens it: PostgreSQL counts this instance from its open on, so a newer
        // version cannot migrate past its code while it boots (OKE1335).
        const instance = { id: this.instanceId, host: hostname(), pid: process.pid };
        await openStoreWaiting(this.storeWaitOptions(), { instance });
      } catch (e) {
        this.storeOpening = undefined;
        throw e;
      } finally {
        this.waitingForStore = false;
      }
    })();
    return this.storeOpening;
  }

  /** How boot waits for an unreachable store, open() and each step after it alike; OKE1096's fix names the settings. */
  private storeWaitOptions() {
    return {
      store: this.store,
      timeoutMs: this.config.connectTimeoutMs,
      logger: this.logger,
      stopped: this.stopped,
      fix:
        this.store.driver === "postgres"
          ? "Check the host and port of DATABASE_URL (or database.url) and that PostgreSQL is up; database.connectTimeoutMs sets how long boot waits (0 = fail at once)."
          : "Check that the store is reachable; database.connectTimeoutMs sets how long boot waits (0 = fail at once).",
      onWaiting: () => (this.waitingForStore = true),
    };
  }

  /**
   * A boot step after open() that calls the store, waited through an outage as open() is
   * (storeStepWaiting): a database that let open() through can refuse the next connection (53300 at
   * its connection limit) or drop one, and that must not end the process. Only that step runs again.
   */
  private async bootStep<T>(step: string, run: () => Promise<T>): Promise<T> {
    try {
      return await storeStepWaiting({ ...this.storeWaitOptions(), step }, run);
    } finally {
      this.waitingForStore = false;
    }
  }

  private async doBoot(): Promise<void> {
    this.stoppedDuringBoot("before it began");
    this.state = "booting";
    await this.openStore();
    this.stoppedDuringBoot("the store was opened");
    await this.fleetClock?.start();
    this.stoppedDuringBoot("the database's time was read");
    this.logger.info({ driver: this.store.driver, env: this.env, role: this.role }, this.storeLine());
    if (this.role !== "all") this.logger.info({ role: this.role }, ROLE_LINES[this.role]);
    logServes(this.logger, this.role === "all" ? this.manifest : servedBy(this.manifest, this.role));
    // Before anything is taken or served: a dev instance on production's store must not join it.
    await this.bootStep("checking the fleet's environments", () =>
      checkFleetEnv({
        store: this.store,
        clock: this.clock,
        logger: this.logger,
        env: this.env,
        instanceId: this.instanceId,
        where:
          this.store.driver === "postgres" && this.ownsStore
            ? `PostgreSQL schema "${this.config.databaseSchema}"`
            : `the ${this.store.driver} store`,
      }),
    );
    this.stoppedDuringBoot("the fleet's environments were checked");
    if (this.consumes) {
      this.state = "orphan_scan";
      // Runs it took before a failure hold live leases now: a second scan does not list them again.
      await this.bootStep("scanning for orphaned runs", () => this.durable.orphanScan());
      this.stoppedDuringBoot("the orphan scan");
    }
    // A web instance starts no worker pool and no broadcast consumer here, only its live readers.
    // Its broadcast heartbeat is the one store call it awaits; a retried start starts no pool twice.
    await this.bootStep("announcing the broadcast consumers", () => this.signals.start());
    this.stoppedDuringBoot("workers started");
    if (this.consumes) {
      this.durable.startScheduler();
      await this.bootStep("reconciling the schedules", () => this.schedules.start());
      this.stoppedDuringBoot("schedules started");
      this.schedulePrune();
    }
    // A web instance resumes no run: listing its flows would hide runs no worker serves (oke status).
    const serves = {
      flows: this.consumes ? [...this.registry.flows.keys()] : [],
      signals: this.signals.onceSignals,
    };
    this.heartbeat = startHeartbeat({
      store: this.store,
      clock: this.clock,
      logger: this.logger,
      instanceId: this.instanceId,
      env: this.env,
      root: this.root,
      ...serves,
      role: this.role,
    });
    if (this.consumes) this.retention.start();
    // Every okengine timer is unref'd; this one handle keeps a worker-only process alive until stop().
    // Not in tests: the runner decides when the process ends (node:test waits for every handle, so a
    // test that failed before its app.stop() hung the whole run).
    if (this.env !== "test") this.keepAlive = setInterval(() => undefined, 1 << 30);
    this.state = "ready";
    // Dev only, once, after boot: a renamed durable flow or a removed worker reboots cleanly and its runs
    // and messages wait unseen. Not in test, nor in prod: a fleet (roles, several apps on one store) has
    // the Console and oke status for that. Never fails the boot: a store error is noted at debug.
    if (this.env === "dev")
      this.track(
        warnStrandedWork(this, { id: this.instanceId, ...serves }).catch((err: unknown) =>
          this.logger.debug({ err }, "okengine: could not check for stranded work"),
        ),
      );
  }

  /**
   * A stop() during boot ends it at the next step: nothing more is started (workers, scheduler,
   * heartbeat, the keep-alive handle that would hold the process open) and the state stays stopping.
   */
  private stoppedDuringBoot(after: string): void {
    if (this.stopping === undefined) return;
    throw new OkeError({
      code: "OKE1097",
      message: `oke boot: stopped while booting, after ${after} (app.stop() was called)`,
    });
  }

  private track(p: Promise<unknown>): void {
    const t = p
      .catch((e: unknown) => this.logger.error({ err: e }, "background task failed"))
      .finally(() => this.tasks.delete(t));
    this.tasks.add(t);
  }

  /** The one boot line that says where queues and runs live. */
  private storeLine(): string {
    // A store handed in was opened by its caller, wherever that put it: the config does not say where.
    if (!this.ownsStore && this.store.driver !== "memory")
      return `okengine: queues and runs in the ${this.store.driver} store given to createApp`;
    switch (this.store.driver) {
      case "file":
        return `okengine: queues and runs in ${resolve(this.root, this.config.fileDir)} (file driver; ${this.config.databaseUrl === undefined ? "set DATABASE_URL to use PostgreSQL" : "pinned by drivers.journal or OKE_JOURNAL, so DATABASE_URL is not used"})`;
      case "postgres":
        return `okengine: queues and runs in PostgreSQL, schema "${this.config.databaseSchema}"`;
      default:
        return "okengine: queues and runs in memory (lost on exit)";
    }
  }

  /** fx.call: checks `in`; a durable callee is its own run. */
  async call(
    flow: AnyFlow,
    input: unknown,
    parent: { runId: string | null; flow: string | null; childRunId?: string | undefined },
  ): Promise<InvokeResult> {
    // A durable callee stores its input in its run row: refused before anything is written. No
    // parent flow means app.invoke (the caller's input, a 422); fx.call's comes from the app (500).
    const inputCheck = (v: unknown): void => {
      if (!flow.durable) return;
      const from = parent.flow === null ? "app.invoke" : `fx.call from ${JSON.stringify(parent.flow)}`;
      checkRunInput(
        v,
        `the input of flow ${JSON.stringify(flow.name ?? "(unnamed)")} (${from})`,
        parent.flow === null,
      );
    };
    // Before the schema too: a validator recursing into a hostile depth would overflow the stack.
    inputCheck(input);
    const value = await checkInput(flow, flow.in, input);
    if (value !== input) inputCheck(value);
    return this.run(flow, value, parent.runId, parent.childRunId);
  }

  /**
   * `given`: a run id that is the same when this run runs again — a keyed request's recorded one
   * (the same on a takeover) or a call's derived one. A plain flow then derives its emits' and
   * calls' ids from it, so running it again enqueues nothing twice.
   */
  private async run(
    flow: AnyFlow,
    input: unknown,
    parentRunId: string | null,
    given?: string,
  ): Promise<InvokeResult> {
    const runId = given ?? newId(this.clock.now());
    if (!flow.durable)
      return {
        kind: "returned",
        value: await executeFlow(this, flow, input, {
          runId,
          attempt: 1,
          parentRunId,
          derivedIds: given !== undefined,
        }),
      };
    if (this.state !== "ready" && this.state !== "draining" && this.state !== "orphan_scan")
      await this.boot();
    return this.durable.start(flow, input, parentRunId, runId);
  }

  async invokeRoute(
    route: HttpRoute,
    request: RouteRequest,
    options?: { runId?: string },
  ): Promise<InvokeResult> {
    const r = this.routeIndex.get(`${route.method} ${route.path}`);
    if (!r)
      throw new OkeError({ code: "OKE1404", message: `No route ${route.method} ${route.path}`, status: 404 });
    // A catch-all's value under its own name ([...slug] → slug): the router can only call it "*".
    const value = await checkInput(
      r.flowRef,
      r.in,
      routeInput({ ...request, params: namedParams(request.params, r.restParam) }),
    );
    return this.run(r.flowRef, value, null, options?.runId);
  }

  readonly emitFanout: FxRuntime["emitFanout"] = (target, payload, options, producer, session) =>
    this.signals.emitFanout(target, payload, options, producer, session);

  live<P>(signal: LiveSignal<P>, listener: LiveListener<P>): () => void;
  live<P>(signal: LiveSignal<P>, options: LiveOptionsRead, listener: LiveListener<P>): () => void;
  live<P>(
    signal: LiveSignal<P>,
    optionsOrListener: LiveOptionsRead | LiveListener<P>,
    listener?: LiveListener<P>,
  ): () => void {
    this.refuseStopped("app.live()");
    if (typeof optionsOrListener === "function")
      return this.signals.lives.live(signal, {}, optionsOrListener);
    if (listener === undefined)
      throw new TypeError("app.live(signal, options, listener): the listener is missing");
    return this.signals.lives.live(signal, optionsOrListener, listener);
  }

  async emit<P, In>(
    target: SignalHandle<P, In>,
    ...args: EmitArgs<EmitInput<P, In>, EmitOptions & { tx?: unknown; id?: string }>
  ): Promise<void> {
    // The payload is the schema's input: checked (and transformed) by prepareEmit, typed there as unknown.
    const [payload, options] = args as [unknown, (EmitOptions & { tx?: unknown; id?: string }) | undefined];
    this.refuseStopped("app.emit()");
    if (this.state === "new" || this.state === "booting") await this.openStore();
    if (options?.id !== undefined)
      return emitOnce<unknown>(this, target, payload, { ...options, id: options.id });
    if (isSignal(target) && target.delivery !== "once")
      return this.emitFanout(target, payload, options, { flow: "app.emit", runId: null });
    const message = await prepareEmit(
      emitContext(this.registry, this.clock.now()),
      target,
      payload,
      options,
      { flow: "app.emit", runId: null },
    );
    if (options?.tx === undefined) return this.enqueue(message);
    await this.store.enqueue([message], this.clock.now(), { tx: options.tx });
  }

  enqueue(message: NewMessage): Promise<void> {
    return this.signals.enqueue(message);
  }

  invoke<I, O>(target: Flow<I, O, true>, input: I): Promise<O | undefined>;
  invoke<I, O>(target: Flow<I, O>, input: I): Promise<O>;
  invoke<I, O>(target: string, input: I): Promise<O | undefined>;
  async invoke<I, O>(target: Flow<I, O> | string, input: I): Promise<O | undefined> {
    const flow =
      typeof target === "string"
        ? this.registry.flows.get(target)
        : (this.registry.named.get(target) ?? target);
    if (!flow)
      throw new OkeError({
        code: "OKE1080",
        message: `No flow named "${typeof target === "string" ? target : (target.name ?? "?")}" in this app.`,
        status: 404,
      });
    const r = await this.call(flow, input, { runId: null, flow: null });
    return r.kind === "returned" ? (r.value as O) : undefined;
  }

  /** After stop() the store is closed and nothing runs: a script or test learns it at once. */
  private refuseStopped(what: string): void {
    if (this.state === "stopping" || this.state === "stopped")
      throw new OkeError({
        code: "OKE1089",
        message: `${what}: the app is ${this.state === "stopped" ? "stopped" : "stopping"} (app.stop() was called)`,
        status: 503,
      });
  }

  async request(input: string | Request, init?: RequestInit): Promise<Response> {
    this.refuseStopped("app.request()");
    this.httpHandler ??= createHttpHandler(this.httpApp(), {
      bodyLimit: this.config.bodyLimit,
      // In-process requests come from the app's own code or tests: a test's failing flow shows its
      // error and stack in the 500's details instead of a bare "Internal error". Never in prod.
      exposeErrors: this.env !== "prod",
      hideServerErrors: this.env === "prod",
    });
    const answered = this.httpHandler.fetch(toRequest(input, init));
    const tracked = answered.then(
      () => undefined,
      () => undefined,
    );
    this.requests.add(tracked);
    void tracked.finally(() => this.requests.delete(tracked));
    return answered;
  }

  async start(
    options: { port?: number; host?: string } = {},
  ): Promise<{ port: number; host: string; console?: { port: number; url: string } }> {
    // Listen first so /_/ready can answer 503 while the orphan scan runs.
    this.server = await startHttpServer(this.httpApp(), {
      port: options.port ?? this.config.port,
      host: options.host ?? this.config.host,
      bodyLimit: this.config.bodyLimit,
      exposeErrors: this.env === "dev",
      hideServerErrors: this.env === "prod",
      limits: this.config,
      streams: this.sse,
    });
    try {
      await this.boot();
    } catch (e) {
      // A library user gets the boot error, not a port left open (a stop() during boot closes it itself).
      if (this.state !== "stopping" && this.state !== "stopped") {
        await this.server.close({ timeoutMs: 0 });
        this.server = undefined;
      }
      throw e;
    }
    // The operator Console (src/console/) on its own port; a port it cannot take stops the app again.
    this.consoleServer = await startConsole(this, this.config).catch(async (e: unknown) => {
      await this.stop({ timeoutMs: 0 });
      throw e;
    });
    this.heartbeat?.setConsole(this.consoleServer?.url ?? null);
    const c = this.consoleServer;
    const bound = { port: this.server.port, host: this.server.host };
    return c ? { ...bound, console: { port: c.port, url: c.url } } : bound;
  }

  private schedulePrune(): void {
    const every = Math.min(this.config.retentionMs, 3_600_000);
    // Armed from when the last prune was due (as RunRetention does), so a clock that jumps during a prune
    // gets the next one at once rather than a period later.
    const arm = (from: number): void => {
      // A prune in flight at stop re-arms when it ends: not once the app is stopping.
      if (this.stopping !== undefined) return;
      const due = from + every;
      this.cancelPrune = this.clock.at(due, () => {
        if (this.stopping !== undefined) return;
        const before = this.clock.now() - this.config.retentionMs;
        this.track(
          Promise.all([this.store.pruneDelivered(before), this.store.pruneFires(before)]).finally(() =>
            arm(Math.max(due, this.clock.now() - every)),
          ),
        );
      });
    };
    arm(this.clock.now());
  }

  wakeEarly(runId: string): Promise<WakeEarlyResult> {
    // A web instance only moves the wake time: a worker resumes the run.
    return this.durable.wakeEarly(
      runId,
      this.consumes && (this.state === "ready" || this.state === "draining"),
    );
  }

  pending<P>(target: OnceSignal<P>, limit?: number): Promise<PendingMessage<P>[]> {
    return this.operator.pending(target.name, limit) as Promise<PendingMessage<P>[]>;
  }

  deadLetters<P>(target: OnceSignal<P>): Promise<DeadLetter<P>[]> {
    return this.operator.deadLetters(target.name) as Promise<DeadLetter<P>[]>;
  }

  async idle(options: { timeoutMs?: number } = {}): Promise<void> {
    // Under vitest's default 5 s test timeout, so a hung handler shows OKE1099 naming it.
    const timeoutMs = options.timeoutMs ?? 4_000;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<"timeout">((r) => {
      timer = realSetTimeout(() => r("timeout"), timeoutMs);
      timer.unref();
    });
    try {
      for (;;) {
        const settled = Promise.all([
          this.signals.whenIdle(),
          this.durable.whenIdle(),
          this.schedules.whenIdle(),
          Promise.allSettled([...this.tasks]),
          Promise.allSettled([...this.requests]),
        ]);
        if ((await Promise.race([settled, expired])) === "timeout") break;
        await new Promise((r) => realSetImmediate(r));
        const busy =
          !this.signals.isIdle() ||
          !this.durable.isIdle() ||
          this.tasks.size > 0 ||
          this.requests.size > 0 ||
          this.schedules.busy;
        if (!busy) return;
      }
    } finally {
      realClearTimeout(timer);
    }
    throw new OkeError({
      code: "OKE1099",
      message: `app.idle(): work still running after ${timeoutMs} ms${await this.describeBusy()}`,
    });
  }

  /** What idle() still waits for, as `: message m1 of "sig" (flow "f"), run r1 (flow "g"), …`. */
  private async describeBusy(): Promise<string> {
    const { messages, broadcasts } = this.signals.leftIds();
    const named = async (what: string, id: string, signal: () => Promise<string | undefined>) => {
      const name = await signal().catch(() => undefined);
      if (name === undefined) return `${what} ${id}`;
      const flows = (this.registry.subscribers.get(name) ?? []).map((f) => f.name ?? "(unnamed)");
      return `${what} ${id} of "${name}"${flows.length > 0 ? ` (flow ${flows.map((f) => JSON.stringify(f)).join(", ")})` : ""}`;
    };
    const parts = await Promise.all([
      ...messages.map((id) => named("message", id, async () => (await this.store.getMessage(id))?.signal)),
      ...broadcasts.map((id) => Promise.resolve(`broadcast ${id}`)),
      ...this.durable.runningIds().map(async (id) => {
        const run = await this.store.getRun(id).catch(() => undefined);
        return run === undefined ? `run ${id}` : `run ${id} (flow ${JSON.stringify(run.flow)})`;
      }),
    ]);
    if (this.schedules.busy) parts.push("a schedule fire");
    if (this.tasks.size > 0) parts.push(`${this.tasks.size} app task(s)`);
    if (this.requests.size > 0) parts.push(`${this.requests.size} in-process request(s) (app.request)`);
    return parts.length === 0 ? "" : `: ${parts.join(", ")}`;
  }

  /**
   * Stops within one deadline (`timeoutMs`, default `shutdownTimeoutMs`):
   * every task the app started — handlers, durable drives and their settles,
   * timers, sweeps, heartbeats, HTTP requests — gets until then, and the last
   * log line names what was still running (counts and ids).
   */
  stop(options: { timeoutMs?: number; drainMs?: number } = {}): Promise<void> {
    // A second call waits for the stop in progress; `drainMs: 0` also cuts its drain short.
    if (this.stopping !== undefined) {
      if (options.drainMs === 0) this.endDrain?.();
      return this.stopping;
    }
    if (this.state === "stopped") return Promise.resolve();
    this.stopping = this.drainThenStop(options);
    return this.stopping;
  }

  /**
   * The drain (http.drainDelayMs): only a listening app that was serving has load balancers to tell.
   * `/_/ready` answers 503 meanwhile; routes, workers, runs and streams go on as before.
   */
  private async drainThenStop(options: { timeoutMs?: number; drainMs?: number }): Promise<void> {
    const drainMs = options.drainMs ?? this.config.drainDelayMs;
    if (drainMs > 0 && this.server !== undefined && this.state === "ready") {
      this.state = "draining";
      this.logger.info(
        { drainMs },
        `stopping: /_/ready answers 503 for ${drainMs} ms while this instance still serves (http.drainDelayMs), then it stops`,
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.endDrain = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.endDrain = undefined;
    }
    await this.stopNow(options);
  }

  private async stopNow(options: { timeoutMs?: number }): Promise<void> {
    const timeoutMs = options.timeoutMs ?? this.config.shutdownTimeoutMs;
    // A duration within this process: on the monotonic clock, so a host clock step during the drain
    // neither cuts it short nor stretches it.
    const deadline = performance.now() + timeoutMs;
    const left = (): number => Math.max(0, Math.ceil(deadline - performance.now()));
    const cutOff: string[] = [];
    /** Waits for `p` until the deadline; names it among what was left if it had not settled. */
    const until = async (what: string, p: Promise<unknown> | undefined): Promise<void> => {
      if (p === undefined) return;
      let timer: NodeJS.Timeout | undefined;
      const done = p.then(
        () => true,
        (err: unknown) => {
          this.logger.warn({ err, task: what }, `stop: ${what} failed`);
          return true;
        },
      );
      const expired = new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), left());
        timer.unref();
      });
      if (!(await Promise.race([done, expired]))) cutOff.push(what);
      clearTimeout(timer);
    };
    this.state = "stopping";
    this.resolveStopped?.();
    // Live streams never finish on their own: end them first, their clients reconnect elsewhere and resume.
    this.sse.closeAll();
    this.cancelPrune?.();
    try {
      await Promise.all([
        until("retention sweep", this.retention.stop()),
        until("schedules", this.schedules.stop()),
        until("prune", this.tasks.size === 0 ? undefined : Promise.allSettled([...this.tasks])),
      ]);
      await Promise.all([
        this.signals.stop(left()),
        this.durable.stop(left()),
        until("http server", this.server?.close({ timeoutMs: left() })),
      ]);
      // Keyed answers already sent whose completions are still on their way to the store (answers
      // go out ahead of them, see src/http/idempotency.ts), and key lock renewals, which end here: a
      // request running past the deadline lets its lock lapse, as a dead process does. Not cut short
      // by the deadline: each is a statement already queued, which store.close() would wait for
      // anyway — the store must not close under it.
      await Promise.all([this.server?.stop(), this.httpHandler?.stop()]);
      await until("console server", this.consoleServer?.close());
      await until("heartbeat", this.heartbeat?.stop());
      this.fleetClock?.stop();
      // A measurement in flight sends no further round trip; its last one lands before the store closes.
      await until("fleet clock", this.fleetClock?.settled());
      // Never cut short: the file driver flushes its log here.
      if (this.ownsStore) await this.store.close();
      this.state = "stopped";
      const { messages, broadcasts } = this.signals.leftIds();
      logStopped(this.logger, {
        messageIds: messages,
        runIds: this.durable.runningIds(),
        broadcastIds: broadcasts,
        tasks: cutOff,
        leaseMs: this.config.leaseMs,
        durableLeaseMs: this.config.durableLeaseMs,
      });
    } finally {
      // Held until here: every deadline timer above is unref'd, so without this handle a process
      // whose only work left is a hung handler would exit before stop() resolves, before the store
      // is closed and the last log line written.
      clearInterval(this.keepAlive);
    }
  }
}
