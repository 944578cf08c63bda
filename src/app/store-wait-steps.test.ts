// Boot's steps after open() (fleet check, orphan scan, broadcast heartbeat, schedules' reconcile) wait through an unavailable store as open() does; other errors fail at once.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createApp, every, flow, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";

const capture = () => {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return {
    logger,
    warns: () => lines.filter((l) => l.level === 40),
    infos: () => lines.filter((l) => l.level === 30),
  };
};

const tooMany = (): Error => Object.assign(new Error("sorry, too many clients already"), { code: "53300" });
const denied = (): Error =>
  Object.assign(new Error("permission denied for table schedules"), { code: "42501" });

type Step = "listInstances" | "listOrphans" | "reconcileSchedules" | "heartbeatSubscriptions";

/** A memory store whose `method` throws `errors` one by one, then answers; open() always succeeds. */
function failingStep(
  method: Step,
  errors: Array<() => Error>,
): { store: Store; calls: () => number; opens: () => number } {
  const base = createMemoryStore();
  let calls = 0;
  let opens = 0;
  const real = base[method].bind(base) as (...a: unknown[]) => Promise<unknown>;
  const store = {
    ...base,
    address: "10.0.0.9:5432/app",
    isUnavailable: (e: unknown) => (e as { code?: unknown }).code === "53300",
    open: () => {
      opens++;
      return base.open();
    },
    [method]: (...args: unknown[]) => {
      const next = errors[calls++];
      return next !== undefined ? Promise.reject(next()) : real(...args);
    },
  } as Store;
  return { store, calls: () => calls, opens: () => opens };
}

const tick = on(every("1h"), flow("steps.tick", { do: () => undefined }));
const nap = flow("steps.nap", { durable: true, do: () => undefined });

describe("boot steps after open() wait for an unavailable store", () => {
  for (const [method, step] of [
    ["listInstances", "checking the fleet's environments"],
    ["listOrphans", "scanning for orphaned runs"],
    ["reconcileSchedules", "reconciling the schedules"],
  ] as const)
    it(`${method} refused twice (53300): that step alone is tried again, logged as open()'s wait is, then boot completes`, async () => {
      const { logger, warns, infos } = capture();
      const { store, calls, opens } = failingStep(method, [tooMany, tooMany]);
      const app = createApp({ modules: [{ tick, nap }], env: "test", store, logger });
      await app.boot();
      expect(app.readiness()).toEqual({ ready: true });
      expect(calls()).toBe(3);
      expect(opens()).toBe(1);
      const w = warns().filter((l) => l.step !== undefined);
      expect(w.map((l) => [l.step, l.attempt, l.code])).toEqual([
        [step, 1, "53300"],
        [step, 2, "53300"],
      ]);
      expect(w[0]?.msg).toMatch(
        /^okengine: the store at 10\.0\.0\.9:5432\/app is unavailable \(53300: sorry, too many clients already\); attempt 1, next try in \d+ ms, giving up in \d+ ms$/,
      );
      expect(infos().find((l) => l.step === step)?.msg).toBe(
        "okengine: the store at 10.0.0.9:5432/app is reachable (attempt 3)",
      );
      await app.stop();
    });

  it("the broadcast consumers' first heartbeat refused twice: tried again, then every consumer delivers", async () => {
    const { logger, warns } = capture();
    const { store, calls } = failingStep("heartbeatSubscriptions", [tooMany, tooMany]);
    const got: string[] = [];
    const news = signal.broadcast<{ n: number }>("steps.news");
    const jobs = signal.once<{ n: number }>("steps.jobs");
    const reader = on(
      news,
      flow("steps.reader", { do: ({ n }: { n: number }) => void got.push(`news ${n}`) }),
    );
    const worker = on(
      jobs,
      flow("steps.worker", { do: ({ n }: { n: number }) => void got.push(`job ${n}`) }),
    );
    const app = createApp({ modules: [{ news, jobs, reader, worker }], env: "test", store, logger });
    await app.boot();
    expect(app.readiness()).toEqual({ ready: true });
    expect(calls()).toBeGreaterThanOrEqual(3);
    expect(
      warns()
        .filter((l) => l.step !== undefined)
        .map((l) => [l.step, l.attempt]),
    ).toEqual([
      ["announcing the broadcast consumers", 1],
      ["announcing the broadcast consumers", 2],
    ]);
    await app.emit(jobs, { n: 1 });
    await app.emit(news, { n: 1 });
    await app.idle();
    expect(got.sort()).toEqual(["job 1", "news 1"]);
    expect((await app.operator.stats("steps.jobs")).delivered).toBe(1);
    await app.stop();
  });

  it("an error that is not an outage, even on a retry, still fails the boot at once, untouched", async () => {
    const { logger, warns } = capture();
    const { store, calls } = failingStep("reconcileSchedules", [tooMany, denied]);
    const app = createApp({ modules: [{ tick, nap }], env: "test", store, logger });
    await expect(app.boot()).rejects.toMatchObject({
      code: "42501",
      message: "permission denied for table schedules",
    });
    expect(calls()).toBe(2);
    expect(warns().map((l) => l.code)).toEqual(["53300"]);
    await app.stop();
  });

  it("gives up after database.connectTimeoutMs with OKE1096 naming the step", async () => {
    const { store } = failingStep(
      "listOrphans",
      Array.from({ length: 100 }, () => tooMany),
    );
    const app = createApp({
      modules: [{ tick, nap }],
      env: "test",
      store,
      logger: capture().logger,
      config: { database: { connectTimeoutMs: 200 } },
    });
    await expect(app.boot()).rejects.toMatchObject({
      code: "OKE1096",
      message: expect.stringMatching(
        /^oke boot: could not reach the store at 10\.0\.0\.9:5432\/app while scanning for orphaned runs in 200 ms \(\d+ attempts; last: 53300: sorry, too many clients already\)$/,
      ) as unknown,
      fix: expect.stringContaining("database.connectTimeoutMs") as unknown,
    });
    await app.stop();
  });

  it("answers /_/ready 503 store_unavailable while the orphan scan waits; stop() ends the wait with OKE1097", async () => {
    const { store, calls } = failingStep(
      "listOrphans",
      Array.from({ length: 1000 }, () => tooMany),
    );
    const app = createApp({
      modules: [{ tick, nap }],
      env: "test",
      store,
      logger: capture().logger,
      config: { database: { connectTimeoutMs: 60_000 } },
    });
    const outcome = app.boot().then(
      () => "booted",
      (e: unknown) => e,
    );
    for (let i = 0; i < 1000 && calls() < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(app.readiness()).toEqual({ ready: false, reason: "store_unavailable" });
    // Bounded by the test's own 30 s timeout: stopping must not wait for the 60 s bound.
    await app.stop();
    expect(await outcome).toMatchObject({
      code: "OKE1097",
      message:
        "oke boot: stopped while scanning for orphaned runs, waiting for the store at 10.0.0.9:5432/app",
    });
    const callsAtStop = calls();
    await new Promise((r) => setTimeout(r, 300));
    expect(calls()).toBe(callsAtStop);
  });
});
