/** Test helpers (okengine/testing): an in-process app on the memory driver with a frozen clock. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import pretty from "pino-pretty";
import { createApp } from "./app/app.ts";
import type { OkeConfig } from "./app/config.ts";
import type { App, CreateAppOptions } from "./app/types.ts";
import { createTimeTravel, type TimeTravel } from "./clock/time-travel.ts";
import type { SentMessage } from "./fx/send.ts";
import { errSerializer, PRETTY_OPTIONS, type Logger } from "./log/logger.ts";
import { loadProject } from "./project/load-project.ts";

export { createTimeTravel } from "./clock/time-travel.ts";
export type { TimeTravel } from "./clock/time-travel.ts";
export type { SentMessage } from "./fx/send.ts";

export interface TestApp extends App {
  /** The frozen clock every lease, wake and timestamp reads. */
  readonly time: TimeTravel;
  /** What fx.send delivered (memory send driver). */
  readonly sent: SentMessage[];
}

export type TestAppOptions = Omit<CreateAppOptions, "clock" | "env" | "modules"> & {
  /** Where the frozen clock starts: epoch ms or a Date (as createTimeTravel takes). Default 0. */
  start?: number | Date;
} & (
    | { modules: CreateAppOptions["modules"]; project?: undefined }
    /** A project directory loaded like `oke` does (oke.config.ts, src/signals, src/channels, src/flows). */
    | { project: string; modules?: undefined }
  );

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
 * Test logs when OKE_LOG_LEVEL asks for them: readable lines written synchronously, so they are
 * out before a failing test's report (pino's transport thread would lose or delay them).
 */
function testLogger(): Logger | undefined {
  const level = process.env.OKE_LOG_LEVEL;
  if (level === undefined || level === "") return undefined;
  return pino(
    { level, serializers: { err: errSerializer } },
    pretty({ ...PRETTY_OPTIONS, sync: true, colorize: process.stdout.isTTY }),
  );
}

/**
 * Boots an app in the `test` environment (memory journal, memory send driver,
 * silent logs) on a time-travel clock starting at `start` (default 0), from
 * modules or from a whole project directory. A config that pins the file
 * journal gets a fresh temporary directory (removed by `stop()`) unless `root`
 * is given, so tests never share the project's `.oke/`.
 */
export async function createTestApp(options: TestAppOptions): Promise<TestApp> {
  const { start, project, modules, ...rest } = options;
  const time = createTimeTravel(start ?? 0);
  const loaded = project === undefined ? undefined : await loadProject(project);
  const { journal, config } = testJournal(rest.config ?? loaded?.config);
  const tempRoot =
    journal === "file" && rest.store === undefined && rest.root === undefined
      ? mkdtempSync(join(tmpdir(), "oke-test-"))
      : undefined;
  const app = createApp({
    ...rest,
    modules: loaded?.modules ?? modules ?? [],
    config,
    root: tempRoot ?? rest.root ?? loaded?.root,
    env: "test",
    clock: time,
    logger: rest.logger ?? testLogger(),
  }) as App & { sent: SentMessage[] };
  if (tempRoot !== undefined) {
    const stop = app.stop.bind(app);
    Object.assign(app, {
      stop: async (o?: { timeoutMs?: number }): Promise<void> => {
        await stop(o);
        rmSync(tempRoot, { recursive: true, force: true });
      },
    });
  }
  try {
    await app.boot();
  } catch (e) {
    if (tempRoot !== undefined) rmSync(tempRoot, { recursive: true, force: true });
    throw e;
  }
  return Object.assign(app, { time });
}
