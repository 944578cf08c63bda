// Helpers for app-level tests on every driver: an app factory, gates, polls with deadlines.
import { pino } from "pino";
import { afterEach } from "vitest";
import { createApp } from "../../src/app/app.ts";
import type { OkeConfig } from "../../src/app/config.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel, type TimeTravel } from "../../src/clock/time-travel.ts";
import type { SentMessage } from "../../src/fx/send.ts";
import type { Logger } from "../../src/log/logger.ts";
import type { Store } from "../../src/store/types.ts";
import type { DriverFixture } from "./drivers.ts";

export type TestApp = App & { time: TimeTravel; sent: SentMessage[] };

/**
 * Per-test apps on one driver: `make` boots an app on a fresh store (or a
 * shared one, for replicas); everything is stopped and cleaned after the test.
 */
export function appFactory(driver: DriverFixture) {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });
  const store = async (): Promise<Store> => {
    const made = await driver.make();
    cleanups.push(made.cleanup);
    return made.store;
  };
  return {
    store,
    async make(
      modules: Array<Record<string, unknown>>,
      opts: { store?: Store; time?: TimeTravel; config?: OkeConfig; boot?: boolean; logger?: Logger } = {},
    ): Promise<TestApp> {
      const appStore = opts.store ?? (await store());
      const time = opts.time ?? createTimeTravel(1_000_000);
      const app: App & { sent?: SentMessage[] } = createApp({
        modules,
        env: "test",
        clock: time,
        store: appStore,
        config: opts.config,
        ...(opts.logger ? { logger: opts.logger } : {}),
      });
      cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
      if (opts.boot !== false) await app.boot();
      return Object.assign(app, { time }) as TestApp;
    },
  };
}

/** A promise with its resolve handle, to hold a handler open. */
export function gate<T = void>(): { promise: Promise<T>; open(v: T): void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

/**
 * `store` with one method held at a gate, for reproducing what happens while a call is out:
 * while `state.gated`, each call of `method` counts in `waiting` and answers only once
 * `state.gate` opens; while `state.failing`, it counts in `waiting` and throws instead.
 * `answered` counts its answers; `calls` counts every method called, by name. Other methods
 * pass through unchanged (sync ones stay sync).
 */
export function gatedStore<S extends object>(store: S, method: keyof S & string) {
  const state = {
    gated: false,
    failing: false,
    waiting: 0,
    answered: 0,
    gate: gate(),
    calls: new Map<string, number>(),
  };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function" || typeof prop !== "string") return value;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== method)
        return (...args: unknown[]) => {
          state.calls.set(prop, (state.calls.get(prop) ?? 0) + 1);
          return fn(...args);
        };
      return async (...args: unknown[]) => {
        state.calls.set(prop, (state.calls.get(prop) ?? 0) + 1);
        if (state.gated) {
          state.waiting++;
          await state.gate.promise;
        }
        if (state.failing) {
          state.waiting++;
          throw new Error("store closed (test)");
        }
        const r = await fn(...args);
        state.answered++;
        return r;
      };
    },
  });
  return { store: proxy, state };
}

/** Waits until `check` is true, re-checking on each macrotask. No wall-clock sleeps. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what = "condition",
  limitMs = 10_000,
): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** A logger that keeps every record (JSON objects) for assertions. */
export function recordingLogger(): { logger: Logger; records: Array<Record<string, unknown>> } {
  const records: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => void records.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, records };
}
