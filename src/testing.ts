/**
 * Test helpers: an in-process app on the memory driver with a frozen clock.
 */
import { createApp } from "./app/app.ts";
import type { App, CreateAppOptions } from "./app/types.ts";
import { createTimeTravel, type TimeTravel } from "./clock/time-travel.ts";
import type { SentMessage } from "./fx/send.ts";

export { createTimeTravel } from "./clock/time-travel.ts";
export type { TimeTravel } from "./clock/time-travel.ts";
export type { SentMessage } from "./fx/send.ts";

export interface TestApp extends App {
  /** The frozen clock every lease, wake and timestamp reads. */
  readonly time: TimeTravel;
  /** What fx.send delivered (memory send driver). */
  readonly sent: SentMessage[];
}

/**
 * Boots an app in the `test` environment (memory journal, memory send driver,
 * silent logs) on a time-travel clock starting at `start` (default 0).
 */
export async function createTestApp(options: Omit<CreateAppOptions, "clock" | "env"> & { start?: number }): Promise<TestApp> {
  const { start, ...rest } = options;
  const time = createTimeTravel(start ?? 0);
  const app = createApp({ ...rest, env: "test", clock: time }) as App & { sent: SentMessage[] };
  await app.boot();
  return Object.assign(app, { time });
}
