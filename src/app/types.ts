/** The public App: its options, the operator API, and the methods scripts and tests call. */
import type { Clock } from "../clock/clock.ts";
import type { ScheduleOperatorApi } from "../clock/operator-types.ts";
import type { Flow } from "../flow/flow.ts";
import type { WakeEarlyResult } from "../durable/durable-runtime.ts";
import type { DeadLetter, EmitArgs, EmitOptions, PendingMessage } from "../fx/types.ts";
import type { Logger } from "../log/logger.ts";
import type { LiveListener, LiveOptionsRead } from "../signal/live-runtime.ts";
import type { EmitInput, LiveSignal, OnceSignal, SignalHandle } from "../signal/signal.ts";
import type { JournalEntry, RunRecord, RunStatus, SignalStats, Store } from "../store/types.ts";
import type { HttpRoute, InvokeResult, Readiness, RouteRequest } from "../http/types.ts";
import type { Env, InstanceRole, OkeConfig } from "./config.ts";
import type { Manifest, ModuleInput } from "./manifest.ts";
import { refuseUnknownKeys, type KeysOf } from "../options.ts";

export type { Env, InstanceRole } from "./config.ts";
export type { ModuleInput, SourceEffects } from "./manifest.ts";
export type { HttpRoute, InvokeResult, Readiness, RouteRequest } from "../http/types.ts";
export type { WakeEarlyResult } from "../durable/durable-runtime.ts";

export interface CreateAppOptions {
  /** Module namespaces (`import * as m`) or `{ path, exports }` records. The app adopts the bindings they export. */
  modules: ReadonlyArray<ModuleInput | Record<string, unknown>>;
  /** `defineConfig(...)` result. */
  config?: OkeConfig;
  /** `dev` | `test` | `prod`. Default: from NODE_ENV (`production` → prod, `test` → test), else dev. */
  env?: Env;
  /** Time source for every timestamp, lease and wake (createTimeTravel in tests). */
  clock?: Clock;
  /** A Store instance to use instead of the configured journal driver (tests, custom runtimes): `drivers.journal` and `DATABASE_URL` are then not read. */
  store?: Store;
  /** Logger; default: pretty in dev, JSON in prod, silent in test. */
  logger?: Logger;
  /** Project root for the file driver's `.oke/` directory. Default: process.cwd(). */
  root?: string;
  /**
   * What this instance runs: `all` (HTTP and background work), `web` (HTTP and emits, no queue work)
   * or `worker` (background work; HTTP answers only `/_/health` and `/_/ready`). Wins over
   * `instance.role` and OKE_ROLE (`oke start --role` sets it). Default: those, else `all`.
   */
  role?: InstanceRole;
}

/** createApp refuses any other key by name. Add a new option here and to the interface above. */
export const CREATE_APP_KEYS = {
  modules: true,
  config: true,
  env: true,
  clock: true,
  store: true,
  logger: true,
  root: true,
  role: true,
} as const satisfies KeysOf<CreateAppOptions>;

/** `createApp({ now })` and other unknown keys throw, naming the key. */
export const checkCreateAppOptions = (options: unknown): void =>
  refuseUnknownKeys("createApp()", options, CREATE_APP_KEYS, {
    now: "time comes from a clock: { clock: createTimeTravel(start) }",
  });

export interface Sleeper {
  runId: string;
  flow: string;
  wakeAt: number;
  label: string | undefined;
}

/** Operator API (the Console calls these). */
export interface OperatorApi {
  signals(): Promise<SignalStats[]>;
  /** A once signal's queue counts. */
  stats(signal: string): Promise<SignalStats>;
  /**
   * A broadcast signal's copies, one entry per flow this app binds to it: the counts of that flow's
   * copies queue (`delivered` includes the copies that failed; `deliveredFailed` counts those).
   */
  copies(signal: string): Promise<Array<SignalStats & { flow: string }>>;
  deadLetters(signal: string, limit?: number): Promise<DeadLetter[]>;
  /**
   * A once signal's messages waiting for a worker, oldest first (at most `limit`, default 100): what
   * was emitted and not yet claimed. With workers off (`role: "web"`) a test reads what a flow emitted.
   */
  pending(signal: string, limit?: number): Promise<PendingMessage[]>;
  replay(signal: string, ids: readonly string[] | "all"): Promise<string[]>;
  discard(signal: string, ids: readonly string[] | "all"): Promise<string[]>;
  runs(filter?: { status?: RunStatus; flow?: string; limit?: number }): Promise<RunRecord[]>;
  run(runId: string): Promise<{ run: RunRecord; journal: JournalEntry[] } | undefined>;
  sleepers(limit?: number): Promise<Sleeper[]>;
  wakeEarly(runId: string): Promise<WakeEarlyResult>;
  /** Schedules (clocks): list, pause/resume, edit/reset, trigger. */
  readonly schedules: ScheduleOperatorApi;
}

export interface App {
  readonly env: Env;
  /** What this instance runs: `all`, `web` or `worker` (CreateAppOptions.role, instance.role, OKE_ROLE). */
  readonly role: InstanceRole;
  readonly manifest: Manifest;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly store: Store;
  /** Opens the store, runs the orphan scan, starts workers and the wake scheduler. Idempotent. */
  boot(): Promise<void>;
  /** boot() + listen on `port` (default: PORT or 6530) and `host` (default loopback), and the Console on its own port. Resolves with the bound addresses. */
  start(options?: {
    port?: number;
    host?: string;
  }): Promise<{ port: number; host: string; console?: { port: number; url: string } }>;
  /**
   * Graceful stop: stop claiming, wait for in-flight work up to `timeoutMs` (default
   * `shutdownTimeoutMs`), close. A listening app first drains for `drainMs` (default
   * `http.drainDelayMs`, 0): `/_/ready` answers 503 while everything still serves, so a load
   * balancer stops routing here before the port closes. A call during a stop waits for that stop;
   * one with `drainMs: 0` also ends its drain at once.
   */
  stop(options?: { timeoutMs?: number; drainMs?: number }): Promise<void>;
  /** In-process HTTP (no socket), like Hono's app.request(). */
  request(input: string | Request, init?: RequestInit): Promise<Response>;
  /** Emit from scripts and tests; resolves when committed. `tx` = caller's pg client inside BEGIN (postgres only). */
  /**
   * `id` (once signals): a caller-chosen message id — a second emit with the same id enqueues nothing and
   * resolves the same (see docs/signals.md#idempotent-emits).
   */
  emit<P, In>(
    target: SignalHandle<P, In>,
    ...args: EmitArgs<EmitInput<P, In>, EmitOptions & { tx?: unknown; id?: string }>
  ): Promise<void>;
  /**
   * Runs a flow in-process as `fx.call` would (checks `in`), typed the same way: a durable flow
   * (`durable: true`) that parks resolves with `undefined`, so its call is `O | undefined`; any
   * other flow's is `O`. By name, the output's type is the caller's to say.
   */
  invoke<I, O>(target: Flow<I, O, true>, input: I): Promise<O | undefined>;
  invoke<I, O>(target: Flow<I, O>, input: I): Promise<O>;
  invoke<I, O>(target: string, input: I): Promise<O | undefined>;
  /**
   * Runs the flow bound to an HTTP route. Throws OkeError (status 422 on bad input). `runId`: a
   * keyed request's recorded run id, the same on a takeover — a plain flow's emits and calls then
   * take ids derived from it, so a re-run enqueues nothing twice; or the id the HTTP layer chose for
   * a durable route's run, so that its answer can name the run (`oke-run-id`).
   */
  invokeRoute(route: HttpRoute, request: RouteRequest, options?: { runId?: string }): Promise<InvokeResult>;
  readiness(): Readiness;
  /** Operator API for the Console. */
  readonly operator: OperatorApi;
  /** Shortcut for operator.wakeEarly. */
  wakeEarly(runId: string): Promise<WakeEarlyResult>;
  /** Resolves when every once queue is empty and no handler or durable run is executing (tests). */
  idle(options?: { timeoutMs?: number }): Promise<void>;
  /**
   * Replays the retained entries of a live signal's tape (of `key`) after the
   * position `after` (default: all), then streams new ones in order, from any
   * instance. Returns the unsubscribe. Without options: the signal's unkeyed tape from its start.
   */
  live<P>(signal: LiveSignal<P>, listener: LiveListener<P>): () => void;
  live<P>(signal: LiveSignal<P>, options: LiveOptionsRead, listener: LiveListener<P>): () => void;
  /** Dead letters of a once signal (operator/test shortcut). */
  deadLetters<P>(target: OnceSignal<P>): Promise<DeadLetter<P>[]>;
  /** Messages of a once signal waiting for a worker, oldest first, payloads typed (operator/test shortcut). */
  pending<P>(target: OnceSignal<P>, limit?: number): Promise<PendingMessage<P>[]>;
}
