/** Test helpers (okengine/testing): an in-process app on the memory driver with a frozen clock. */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import pg from "pg";
import { pino } from "pino";
import pretty from "pino-pretty";
import { createApp } from "./app/app.ts";
import type { OkeConfig, ResolvedConfig } from "./app/config.ts";
import type { App, CreateAppOptions } from "./app/types.ts";
import type { Channel } from "./channel/channel.ts";
import type { Duration } from "./clock/duration.ts";
import { advanceMs, createTimeTravel, type TimeTravel } from "./clock/time-travel.ts";
import { nextFireAt } from "./clock/schedule-runtime.ts";
import { OkeError } from "./errors.ts";
import type { SentMessage } from "./fx/send.ts";
import { errSerializer, PRETTY_OPTIONS, type Logger } from "./log/logger.ts";
import { loadProject } from "./project/load-project.ts";

export { createTimeTravel } from "./clock/time-travel.ts";
export type { TimeTravel } from "./clock/time-travel.ts";
export type { SentMessage } from "./fx/send.ts";

/** What `advanceAsync` takes besides the span. */
export interface AdvanceAsyncOptions {
  /** Most deadlines it stops at before giving up with OKE1088 (a flow that sleeps in a loop). Default 10 000. */
  maxSteps?: number;
  /**
   * Real time it may take in all, idle waits included, before giving up with OKE1088 (or OKE1099
   * from an idle wait that does not end). Default 4 000: under vitest's 5 s test timeout.
   */
  timeoutMs?: number;
  /** Ends it early: it rejects with the signal's reason at the next deadline. */
  signal?: AbortSignal;
}

/** The test app's clock: the frozen clock, plus a move that lets the app work at each deadline. */
export interface TestTime extends TimeTravel {
  /**
   * Moves time forward like `advance`, but stops at every deadline of the app's work inside the
   * span, in order — a durable run's wake or lease, a schedule's slot — and waits for the app to
   * go idle at each before going on, so work runs at the time it was due. Resolves with the new
   * now, once the app is idle there.
   */
  advanceAsync(by: Duration | number, options?: AdvanceAsyncOptions): Promise<number>;
}

/** A sent message whose payload has its channel's type. */
export interface SentMessageOf<P> extends SentMessage {
  payload: P;
}

/** What fx.send delivered, in order, with a typed filter by channel. */
export interface SentLog extends Array<SentMessage> {
  /** The messages sent to `channel`, their payloads typed as the channel's. */
  of<P>(channel: Channel<P>): Array<SentMessageOf<P>>;
  /** The messages sent to the channel of that name. */
  of(channel: string): SentMessage[];
}

export interface TestApp extends App {
  /** The frozen clock every lease, wake and timestamp reads. */
  readonly time: TestTime;
  /** What fx.send delivered (memory send driver). */
  readonly sent: SentLog;
}

export type TestAppOptions = Omit<CreateAppOptions, "clock" | "env" | "modules"> & {
  /** Where the frozen clock starts: epoch ms or a Date (as createTimeTravel takes). Default 0. */
  start?: number | Date;
  /**
   * Which schedules (`every`, `clock`) fire: `true` all, `false` none, or the names of those that
   * do (a clock's name; an `every`'s flow name). The others are paused (`app.operator.schedules`
   * can `resume` or `trigger` them). Default: none with `project`, all with `modules`.
   */
  schedules?: boolean | readonly string[];
} & (
    | { modules: CreateAppOptions["modules"]; project?: undefined }
    /**
     * A project directory loaded like `oke` does (oke.config.ts, src/signals, src/channels,
     * src/flows). Relative to vitest's root under the okengine plugin, else to the current directory.
     */
    | { project: string; modules?: undefined }
  );

/**
 * A test app's stop deadline: well inside vitest's 10 s hook timeout (and, after idle()'s 4 s, its
 * 5 s test timeout), so a stop after a hung handler ends before the runner gives up on it and the
 * test shows its own error rather than "Hook timed out". What is left then is given up as at any
 * stop deadline. `env.test.shutdownTimeoutMs` in the config, or stop({ timeoutMs }), sets another.
 */
const TEST_STOP_TIMEOUT_MS = 500;

/** Deadlines advanceAsync stops at before it gives up (as vitest's fake timers loop limit). */
const MAX_STEPS = 10_000;

/**
 * The journal a test app uses: the one its config pins (`env.test.drivers.journal`, else
 * `drivers.journal`), else memory. OKE_JOURNAL is an override for `oke dev` / `oke start`: a test
 * must not pick up the project's `.oke/` (dead letters of earlier runs, its lock) from the shell.
 */
function testJournal(config: OkeConfig | undefined): {
  journal: "memory" | "file" | "postgres";
  config: OkeConfig;
} {
  const pinned = config?.env?.test?.drivers?.journal ?? config?.drivers?.journal;
  if (pinned !== undefined) return { journal: pinned, config: config ?? {} };
  const base = config ?? {};
  const test = base.env?.test ?? {};
  return {
    journal: "memory",
    config: {
      ...base,
      env: { ...base.env, test: { ...test, drivers: { ...test.drivers, journal: "memory" } } },
    },
  };
}

/**
 * The schema a test app's postgres journal works in, when it needs one of its own: the config (the
 * test's, else the project's) names none, so the app would work in `okengine`, the schema `oke dev`
 * uses on that database, reading and taking the dev app's runs and messages and leaving its own for
 * the next run. Then the config gets a fresh one (`oke_test_<12 hex>`, created by the migrations at
 * boot, dropped after stop). A schema the config names, even `okengine`, is the test's to keep.
 * "Names" as resolveConfig reads it: `env.test.database` over `database`.
 */
function testSchema(config: OkeConfig): { schema: string | undefined; config: OkeConfig } {
  const test = config.env?.test ?? {};
  if ({ ...config.database, ...test.database }.schema !== undefined) return { schema: undefined, config };
  const schema = `oke_test_${randomBytes(6).toString("hex")}`;
  return {
    schema,
    config: { ...config, env: { ...config.env, test: { ...test, database: { ...test.database, schema } } } },
  };
}

/**
 * Drops a test app's own schema, once its store is closed. A failure is logged, not thrown: the
 * test's outcome stands, and the warning names the statement that removes what is left.
 */
async function dropTestSchema(schema: string, config: ResolvedConfig, logger: Logger): Promise<void> {
  const statement = `DROP SCHEMA IF EXISTS "${schema}" CASCADE`;
  const client = new pg.Client({
    connectionString: config.databaseUrl,
    application_name: `okengine-test-drop:${schema}`,
    connectionTimeoutMillis: config.connectAttemptTimeoutMs,
  });
  // A connection that fails after connect (the server going away) must not be an uncaught error.
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query(statement);
  } catch (err) {
    logger.warn(
      { err, schema },
      `createTestApp: could not drop the test app's schema "${schema}"; run ${statement}`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Test logs (warn and up unless OKE_LOG_LEVEL says otherwise): readable lines written synchronously, so they are
 * out before a failing test's report (pino's transport thread would lose or delay them).
 */
function testLogger(): Logger | undefined {
  // Warnings and errors by default: a handler that threw on every attempt, or a sleep in a flow that
  // is not durable, said nothing in a test whose only failure was an empty list. `silent` for none.
  const level = process.env.OKE_LOG_LEVEL || "warn";
  if (level === "silent") return undefined;
  return pino(
    { level, serializers: { err: errSerializer } },
    pretty({ ...PRETTY_OPTIONS, sync: true, colorize: process.stdout.isTTY }),
  );
}

/**
 * The project directory: a relative one is read against vitest's root when okengine's plugin runs
 * the tests (it passes the root), so `project: "."` is the project whatever directory vitest was
 * started from; elsewhere (node:test) against the current directory, as Node reads paths.
 */
function projectDir(project: string): string {
  const root = process.env.OKE_VITEST_PLUGIN === "1" ? process.env.OKE_VITEST_ROOT : undefined;
  return root === undefined || root === "" || isAbsolute(project) ? project : resolve(root, project);
}

/** Pauses the schedules a test leaves out; a name that is no schedule of the app throws, listing them. */
async function pauseLeftOut(app: App, schedules: boolean | readonly string[]): Promise<void> {
  const names = app.manifest.clocks.map((c) => c.name);
  if (schedules === true) return;
  const kept = new Set(schedules === false ? [] : schedules);
  for (const name of kept)
    if (!names.includes(name))
      throw new TypeError(
        `createTestApp({ schedules }): "${name}" is not a schedule of this app (its schedules: ${names.length === 0 ? "none" : names.map((n) => JSON.stringify(n)).join(", ")})`,
      );
  // A web instance fires no schedules and never stores them, so there is nothing to pause (pausing
  // one it never stored threw "cron … not found" in any project that declares a clock).
  if (app.role === "web") return;
  for (const name of names) if (!kept.has(name)) await app.operator.schedules.pause(name);
}

/** `at` as an ISO instant, for messages. */
const iso = (at: number): string => new Date(at).toISOString();

/**
 * advanceAsync for one app: deadlines come from the store (runs' wakes and leases) and the
 * schedules (their next slots), not from every timer on the clock, so housekeeping timers (the
 * broadcast heartbeat every 5 s, hourly prunes) fire once per jump between deadlines as with
 * `advance`, instead of costing a step each.
 */
function advanceAsyncOf(
  app: App,
  time: TimeTravel,
  stopped: () => boolean,
): (by: Duration | number, options?: AdvanceAsyncOptions) => Promise<number> {
  const durableFlows = app.manifest.flows.filter((f) => f.durable).map((f) => f.name);

  /** The next deadline after now, up to `until`, and what it is (for the step limit's message). */
  const nextDeadline = async (
    until: number,
  ): Promise<{ at: number; what: "wake" | "schedule" | "timer" } | undefined> => {
    const now = time.now();
    const found: Array<{ at: number; what: "wake" | "schedule" | "timer" }> = [];
    let passed = false;
    const add = (at: number | null, what: "wake" | "schedule"): void => {
      if (at === null) return;
      if (at > now) found.push({ at, what });
      else passed = true;
    };
    add(durableFlows.length === 0 ? null : await app.store.nextWakeAt({ flows: durableFlows }), "wake");
    // The store's records, not operator.schedules.list(): that view works out DST notes per clock.
    for (const r of await app.store.listSchedules()) add(nextFireAt(r, now), "schedule");
    // A deadline already passed that the app has not acted on hides the ones behind it: step to
    // the clock's next timer then (the app's own, armed on it) so time still moves in order.
    const timer = passed ? time.nextTimer() : undefined;
    if (timer !== undefined) found.push({ at: timer, what: "timer" });
    return found.filter((f) => f.at <= until).sort((a, b) => a.at - b.at)[0];
  };

  /** Names what kept the steps coming: the earliest sleeper or schedule. */
  const describeCause = async (what: "wake" | "schedule" | "timer"): Promise<string> => {
    if (what === "schedule") {
      const s = (await app.operator.schedules.list())
        .filter((v) => v.nextFireAt !== null)
        .sort((a, b) => a.nextFireAt! - b.nextFireAt!)[0];
      if (s !== undefined)
        return `schedule "${s.name}" (${s.every !== null ? `every ${s.every}` : `cron "${s.cron}"`}) fires next at ${iso(s.nextFireAt!)}`;
    }
    const sleeper = (await app.operator.sleepers(20)).sort((a, b) => a.wakeAt - b.wakeAt)[0];
    if (sleeper !== undefined)
      return `run ${sleeper.runId} (flow "${sleeper.flow}") sleeps${sleeper.label === undefined ? "" : ` ("${sleeper.label}")`} until ${iso(sleeper.wakeAt)}`;
    return "a running run's lease or a timer of the app";
  };

  return async (by, options = {}) => {
    const what = "time.advanceAsync";
    const span = advanceMs(by, what);
    const shown = typeof by === "string" ? JSON.stringify(by) : String(by);
    const maxSteps = options.maxSteps ?? MAX_STEPS;
    const budgetMs = options.timeoutMs ?? 4_000;
    // Real time, on the monotonic clock: the app's own clock is the frozen one being moved.
    const deadline = performance.now() + budgetMs;
    const idle = async (): Promise<void> =>
      app.idle({ timeoutMs: Math.max(1, Math.ceil(deadline - performance.now())) });
    const from = time.now();
    const target = from + span;
    const check = (): void => {
      options.signal?.throwIfAborted();
      if (stopped())
        throw new OkeError({
          code: "OKE1089",
          message: `${what}(${shown}): the app is stopped (app.stop() was called)`,
          status: 503,
        });
    };
    check();
    // Work already running (a handler awaiting its mocked call) ends at the time it began.
    await idle();
    let steps = 0;
    for (;;) {
      check();
      const next = await nextDeadline(target);
      if (next === undefined) break;
      const overTime = performance.now() >= deadline;
      if (steps >= maxSteps || overTime) {
        const cause = await describeCause(next.what);
        const after = overTime ? `${budgetMs} ms (${steps} deadlines)` : `${steps} deadlines`;
        throw new OkeError({
          code: "OKE1088",
          message: `${what}(${shown}): gave up after ${after}, ${time.now() - from} ms into the ${span} ms asked for (now ${iso(time.now())}); they keep coming: ${cause}`,
          fix: "A flow that sleeps in a loop needs a longer sleep or a way out. Pass { maxSteps, timeoutMs } to allow more, or use time.advance() to jump over them.",
        });
      }
      steps++;
      time.set(next.at);
      await idle();
    }
    check();
    time.set(target);
    await idle();
    return time.now();
  };
}

/**
 * Boots an app in the `test` environment (memory journal, memory send driver,
 * silent logs) on a time-travel clock starting at `start` (default 0), from
 * modules or from a whole project directory. A config that pins the file
 * journal gets a fresh temporary directory (removed by `stop()`) unless `root`
 * is given, so tests never share the project's `.oke/`; one that pins the
 * postgres journal without naming `database.schema` gets a fresh schema
 * (dropped by `stop()`), so tests never share `oke dev`'s `okengine` schema.
 */
export async function createTestApp(options: TestAppOptions): Promise<TestApp> {
  const { start, project, modules, schedules, ...rest } = options;
  const time = createTimeTravel(start ?? 0);
  const loaded = project === undefined ? undefined : await loadProject(projectDir(project));
  const { journal, config: journalConfig } = testJournal(rest.config ?? loaded?.config);
  // A schema of its own unless the config names one (testSchema); a store given is the caller's.
  const { config, schema: ownSchema } =
    journal === "postgres" && rest.store === undefined
      ? testSchema(journalConfig)
      : { config: journalConfig, schema: undefined };
  const tempRoot =
    journal === "file" && rest.store === undefined && rest.root === undefined
      ? mkdtempSync(join(tmpdir(), "oke-test-"))
      : undefined;
  const removeTempRoot = (): void => {
    if (tempRoot !== undefined) rmSync(tempRoot, { recursive: true, force: true });
  };
  let app: App & { sent: SentMessage[]; config: ResolvedConfig };
  try {
    app = createApp({
      ...rest,
      modules: loaded?.modules ?? modules ?? [],
      config,
      root: tempRoot ?? rest.root ?? loaded?.root,
      env: "test",
      clock: time,
      logger: rest.logger ?? testLogger(),
    }) as App & { sent: SentMessage[]; config: ResolvedConfig };
  } catch (e) {
    // Refused before any store was opened (a bad config or module): nothing but the directory to remove.
    removeTempRoot();
    throw e;
  }
  const stopMs = config.env?.test?.shutdownTimeoutMs ?? TEST_STOP_TIMEOUT_MS;
  const stop = app.stop.bind(app);
  let stopped = false;
  // Once, however often stop() is called: after the store closed, so nothing writes to what goes.
  let cleanup: Promise<void> | undefined;
  const cleanUp = async (): Promise<void> => {
    removeTempRoot();
    if (ownSchema !== undefined) await dropTestSchema(ownSchema, app.config, app.logger);
  };
  Object.assign(app, {
    stop: async (o: { timeoutMs?: number; drainMs?: number } = {}): Promise<void> => {
      stopped = true;
      try {
        await stop({ ...o, timeoutMs: o.timeoutMs ?? stopMs });
      } finally {
        cleanup ??= cleanUp();
        await cleanup;
      }
    },
  });
  try {
    await app.boot();
  } catch (e) {
    // The store may be open (its pool connected, the migrations run): close it, then clean up.
    await app
      .stop()
      .catch((err: unknown) =>
        app.logger.warn({ err }, "createTestApp: stopping the app whose boot failed failed too"),
      );
    throw e;
  }
  try {
    await pauseLeftOut(app, schedules ?? project === undefined);
  } catch (e) {
    await app.stop();
    throw e;
  }
  const sent = app.sent;
  // Not enumerable: `expect(app.sent).toEqual([...])` compares the messages alone.
  Object.defineProperty(sent, "of", {
    value: (channel: Channel | string): SentMessage[] => {
      const name = typeof channel === "string" ? channel : channel.name;
      return sent.filter((m) => m.channel === name);
    },
  });
  const testTime: TestTime = Object.assign(time, {
    advanceAsync: advanceAsyncOf(app, time, () => stopped),
  });
  return Object.assign(app, { time: testTime }) as unknown as TestApp;
}
