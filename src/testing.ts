/** Test helpers (okengine/testing): an in-process app on the memory driver with a frozen clock. */
import { createApp } from "./app/app.ts";
import type { App, CreateAppOptions } from "./app/types.ts";
import { createTimeTravel, type TimeTravel } from "./clock/time-travel.ts";
import type { SentMessage } from "./fx/send.ts";
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
  /** Epoch ms the frozen clock starts at. Default 0. */
  start?: number;
} & (
    | { modules: CreateAppOptions["modules"]; project?: undefined }
    /** A project directory loaded like `oke` does (oke.config.ts, src/signals, src/channels, src/flows). */
    | { project: string; modules?: undefined }
  );

/**
 * Boots an app in the `test` environment (memory journal, memory send driver,
 * silent logs) on a time-travel clock starting at `start` (default 0), from
 * modules or from a whole project directory.
 */
export async function createTestApp(options: TestAppOptions): Promise<TestApp> {
  const { start, project, modules, ...rest } = options;
  const time = createTimeTravel(start ?? 0);
  const loaded = project === undefined ? undefined : await loadProject(project);
  const app = createApp({
    ...rest,
    modules: loaded?.modules ?? modules ?? [],
    config: rest.config ?? loaded?.config,
    root: loaded?.root ?? rest.root,
    env: "test",
    clock: time,
  }) as App & { sent: SentMessage[] };
  await app.boot();
  return Object.assign(app, { time });
}
