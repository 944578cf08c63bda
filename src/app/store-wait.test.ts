// Boot while the store is unreachable: open() retried on connection-class errors (logged, bounded, stoppable), statement errors fail at once.
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createApp, flow, http, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { resolveConfig } from "./config.ts";
import { jittered, openStoreWaiting } from "./store-wait.ts";

const capture = () => {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, warns: () => lines.filter((l) => l.level === 40) };
};

const refused = (): Error =>
  Object.assign(new Error("connect ECONNREFUSED 10.0.0.9:5432"), { code: "ECONNREFUSED" });
const startingUp = (): Error =>
  Object.assign(new Error("the database system is starting up"), { code: "57P03" });
const denied = (): Error =>
  Object.assign(new Error("permission denied for schema okengine"), { code: "42501" });

/** A memory store whose open() throws `errors` one by one, then succeeds. */
function flakyStore(errors: Array<() => Error>): { store: Store; opens: () => number } {
  const base = createMemoryStore();
  let opens = 0;
  const store: Store = {
    ...base,
    address: "10.0.0.9:5432/app",
    isUnavailable: (e) => {
      const code = (e as { code?: unknown }).code;
      return code === "ECONNREFUSED" || code === "57P03";
    },
    open: async () => {
      const next = errors[opens++];
      if (next !== undefined) throw next();
      await base.open();
    },
  };
  return { store, opens: () => opens };
}

const ping = on(http.get("/ping"), flow("ping", { do: () => ({ ok: true }) }));

describe("boot waits for an unreachable store", () => {
  it("retries connection-class errors with backoff, one warning each, then boots", async () => {
    const { logger, warns } = capture();
    const { store, opens } = flakyStore([refused, startingUp, refused]);
    const app = createApp({ modules: [{ ping }], env: "test", store, logger });
    await app.boot();
    expect(opens()).toBe(4);
    expect(app.readiness()).toEqual({ ready: true });
    const w = warns();
    expect(w).toHaveLength(3);
    expect(w.map((l) => l.attempt)).toEqual([1, 2, 3]);
    // 100, 200, 400 ms, each jittered down to as little as half (exact sleeps: the seeded case below).
    const next = w.map((l) => l.nextTryMs as number);
    [100, 200, 400].forEach((base, i) => {
      expect(next[i]).toBeGreaterThanOrEqual(base / 2);
      expect(next[i]).toBeLessThanOrEqual(base);
    });
    expect(w[0]?.msg).toContain("10.0.0.9:5432/app");
    expect(w[0]?.msg).toContain("ECONNREFUSED");
    expect(w[1]?.msg).toContain("57P03: the database system is starting up");
    expect(w[0]?.msg).toMatch(/attempt 1, next try in \d+ ms, giving up in \d+ ms/);
    expect(w[0]?.code).toBe("ECONNREFUSED");
    await app.stop();
  });

  it("each retry warning is one line: the error's code and message, never its stack", async () => {
    const raw: string[] = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void raw.push(l) });
    const { store } = flakyStore([refused, refused]);
    const app = createApp({ modules: [{ ping }], env: "test", store, logger });
    await app.boot();
    const warns = raw.filter((l) => l.includes('"level":40'));
    expect(warns).toHaveLength(2);
    for (const line of warns) {
      expect(line.trimEnd()).not.toContain("\n"); // one line, and no newline inside it either
      expect(line).not.toContain("stack");
      const w = JSON.parse(line) as Record<string, unknown>;
      expect(w.err).toBeUndefined();
      expect(w.code).toBe("ECONNREFUSED");
      expect(w.msg).toContain("(connect ECONNREFUSED 10.0.0.9:5432); attempt");
    }
    await app.stop();
  });

  it("fails at once on a statement error (no retry, no warning)", async () => {
    const { logger, warns } = capture();
    const { store, opens } = flakyStore([denied]);
    const app = createApp({ modules: [{ ping }], env: "test", store, logger });
    await expect(app.boot()).rejects.toThrow("permission denied for schema okengine");
    expect(opens()).toBe(1);
    expect(warns()).toHaveLength(0);
  });

  it("gives up after database.connectTimeoutMs with OKE1096 naming the address and the option", async () => {
    const { logger, warns } = capture();
    const { store, opens } = flakyStore(Array.from({ length: 100 }, () => refused));
    const app = createApp({
      modules: [{ ping }],
      env: "test",
      store,
      logger,
      config: { database: { connectTimeoutMs: 250 } },
    });
    const err = await app.boot().then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; fix?: string },
    );
    expect(err?.code).toBe("OKE1096");
    expect(err?.message).toMatch(
      /^oke boot: could not reach the store at 10\.0\.0\.9:5432\/app in 250 ms \(\d+ attempts; last: connect ECONNREFUSED/,
    );
    expect(err?.fix).toContain("database.connectTimeoutMs");
    // Sleeps of 50-100, 100-200, then the rest of the bound: four attempts at most (jitter low all
    // along), three with none; a loaded machine may fit fewer.
    expect(opens()).toBeGreaterThanOrEqual(2);
    expect(opens()).toBeLessThanOrEqual(4);
    expect(warns().length).toBe(opens() - 1);
  });

  it("an open() that hangs (a host dropping packets) ends at the bound with OKE1096", async () => {
    const base = createMemoryStore();
    const store: Store = {
      ...base,
      address: "10.0.0.9:5432/app",
      isUnavailable: () => true,
      open: () => new Promise<void>(() => undefined),
    };
    const app = createApp({
      modules: [{ ping }],
      env: "test",
      store,
      config: { database: { connectTimeoutMs: 200 } },
    });
    await expect(app.boot()).rejects.toMatchObject({
      code: "OKE1096",
      message: expect.stringMatching(
        /^oke boot: could not reach the store at 10\.0\.0\.9:5432\/app in 200 ms \(1 attempt; last: open\(\) still running after \d+ ms\)$/,
      ) as unknown,
    });
  });

  it("connectTimeoutMs 0 fails at the first connection error", async () => {
    const { store, opens } = flakyStore([refused]);
    const app = createApp({
      modules: [{ ping }],
      env: "test",
      store,
      config: { database: { connectTimeoutMs: 0 } },
    });
    await expect(app.boot()).rejects.toMatchObject({
      code: "OKE1096",
      message:
        "oke boot: could not reach the store at 10.0.0.9:5432/app (connect ECONNREFUSED 10.0.0.9:5432)",
    });
    expect(opens()).toBe(1);
  });

  it("answers /_/ready 503 store_unavailable and /_/health 200 while waiting; stop() ends the wait", async () => {
    const { store, opens } = flakyStore(Array.from({ length: 1000 }, () => refused));
    const app = createApp({
      modules: [{ ping }],
      env: "test",
      store,
      config: { database: { connectTimeoutMs: 60_000 }, console: { port: false } },
    });
    const started = app.start({ port: 0, host: "127.0.0.1" });
    const outcome = started.then(
      () => "booted",
      (e: unknown) => e,
    );
    // Until the first failure boot says "booting"; then the store's reason.
    for (let i = 0; i < 1000 && app.readiness().ready === false && opens() < 2; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(app.readiness()).toEqual({ ready: false, reason: "store_unavailable" });
    const ready = await app.request("/_/ready");
    expect(ready.status).toBe(503);
    expect(await ready.text()).toContain("store_unavailable");
    expect((await app.request("/_/health")).status).toBe(200);
    const t0 = Date.now();
    await app.stop();
    expect(await outcome).toMatchObject({ code: "OKE1097" });
    // The backoff sleeps are 2 s at most; stopping must not wait for the 60 s bound.
    expect(Date.now() - t0).toBeLessThan(5_000);
    const opensAtStop = opens();
    await new Promise((r) => setTimeout(r, 300));
    expect(opens()).toBe(opensAtStop);
  });
});

describe("the retry backoff's jitter", () => {
  it("sleeps between half and all of the doubling delay, drawn from the given source", async () => {
    // A fixed sequence stands for a seeded generator: 0 -> half the delay, 0.5 -> three quarters.
    const draws = [0, 0.5, 0.999, 0.25];
    let i = 0;
    const { logger, warns } = capture();
    const { store, opens } = flakyStore(Array.from({ length: draws.length }, () => refused));
    await openStoreWaiting({
      store,
      timeoutMs: 60_000,
      logger,
      stopped: new Promise(() => undefined),
      fix: "",
      random: () => draws[i++]!,
    });
    expect(opens()).toBe(draws.length + 1);
    // Bases 100, 200, 400, 800 (the 2 s cap: jittered() below).
    expect(warns().map((l) => l.nextTryMs)).toEqual([50, 150, 400, 500]);
  });

  it("jittered() stays within [delay/2, delay]", () => {
    expect(jittered(2_000, () => 0)).toBe(1_000);
    expect(jittered(2_000, () => 0.999_999)).toBe(2_000);
    expect(jittered(100, () => 0.5)).toBe(75);
  });
});

describe("app.emit() before boot", () => {
  const task = signal.once("tasks.early");
  const seen: unknown[] = [];
  const worker = on(task, flow("tasks.earlyWorker", { do: (input: { n: number }) => void seen.push(input) }));

  it("waits for the unreachable store as boot does, then boot shares that open", async () => {
    seen.length = 0;
    const { logger, warns } = capture();
    const { store, opens } = flakyStore([refused, startingUp]);
    const app = createApp({ modules: [{ worker }], env: "test", store, logger });
    // Before the fix the emit called store.open() once and rejected with the refusal.
    await app.emit(task, { n: 1 });
    expect(opens()).toBe(3);
    expect(warns().map((l) => l.attempt)).toEqual([1, 2]);
    await app.boot();
    expect(opens()).toBe(3);
    await app.idle();
    expect(seen).toEqual([{ n: 1 }]);
    await app.stop();
  });

  it("an emit and a boot at once wait through one sequence of attempts", async () => {
    const { logger, warns } = capture();
    const { store, opens } = flakyStore([refused, refused]);
    const app = createApp({ modules: [{ worker }], env: "test", store, logger });
    await Promise.all([app.emit(task, { n: 2 }), app.boot(), app.emit(task, { n: 3 })]);
    expect(opens()).toBe(3);
    expect(warns()).toHaveLength(2);
    await app.stop();
  });

  it("fails with boot's OKE1096 at database.connectTimeoutMs; a later emit tries again", async () => {
    const { store, opens } = flakyStore(Array.from({ length: 100 }, () => refused));
    const app = createApp({
      modules: [{ worker }],
      env: "test",
      store,
      logger: capture().logger,
      config: { database: { connectTimeoutMs: 150 } },
    });
    await expect(app.emit(task, { n: 4 })).rejects.toMatchObject({
      code: "OKE1096",
      message: expect.stringMatching(
        /^oke boot: could not reach the store at 10\.0\.0\.9:5432\/app in 150 ms/,
      ) as unknown,
    });
    const first = opens();
    await expect(app.emit(task, { n: 5 })).rejects.toMatchObject({ code: "OKE1096" });
    expect(opens()).toBeGreaterThan(first);
    await app.stop();
  });

  it("stop() ends an emit's wait with OKE1097", async () => {
    const { store, opens } = flakyStore(Array.from({ length: 1000 }, () => refused));
    const app = createApp({
      modules: [{ worker }],
      env: "test",
      store,
      logger: capture().logger,
      config: { database: { connectTimeoutMs: 60_000 } },
    });
    const outcome = app.emit(task, { n: 6 }).then(
      () => "emitted",
      (e: unknown) => e,
    );
    for (let i = 0; i < 1000 && opens() < 2; i++) await new Promise((r) => setTimeout(r, 10));
    await app.stop();
    expect(await outcome).toMatchObject({ code: "OKE1097" });
  });
});

describe("database.connectTimeoutMs", () => {
  it("defaults to 30 s and refuses a negative bound", () => {
    expect(resolveConfig(undefined, "test").connectTimeoutMs).toBe(30_000);
    expect(resolveConfig({ database: { connectTimeoutMs: 0 } }, "test").connectTimeoutMs).toBe(0);
    expect(() => resolveConfig({ database: { connectTimeoutMs: -1 } }, "test")).toThrow(
      "oke boot: database.connectTimeoutMs must be a non-negative integer, got -1",
    );
  });

  it("database.connectAttemptTimeoutMs defaults to 5 s, 0 allowed, negative refused", () => {
    expect(resolveConfig(undefined, "test").connectAttemptTimeoutMs).toBe(5_000);
    expect(resolveConfig({ database: { connectAttemptTimeoutMs: 0 } }, "test").connectAttemptTimeoutMs).toBe(
      0,
    );
    expect(() => resolveConfig({ database: { connectAttemptTimeoutMs: -5 } }, "test")).toThrow(
      "oke boot: database.connectAttemptTimeoutMs must be a non-negative integer, got -5",
    );
  });
});

describe("the wait's bound and host clock steps", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a host clock step of +40 s during the wait does not use up its 10 s bound", async () => {
    const clock = hostClockSteps();
    const { logger, warns } = capture();
    // The first open fails, and the host clock steps forward while it does (NTP after a network came up).
    const { store, opens } = flakyStore([
      () => {
        clock.step(40_000);
        return refused();
      },
    ]);
    await openStoreWaiting({
      store,
      timeoutMs: 10_000,
      logger,
      stopped: new Promise(() => undefined),
      fix: "",
      random: () => 0,
    });
    expect(opens()).toBe(2);
    expect(warns().map((l) => [l.nextTryMs, (l.givesUpInMs as number) > 9_000])).toEqual([[50, true]]);
  });

  it("a host clock step of -40 s during the wait does not stretch its 300 ms bound", async () => {
    const clock = hostClockSteps();
    const { logger } = capture();
    const { store } = flakyStore([
      () => {
        clock.step(-40_000);
        return refused();
      },
      ...Array.from({ length: 1_000 }, () => refused),
    ]);
    const waited = openStoreWaiting({
      store,
      timeoutMs: 300,
      logger,
      stopped: new Promise(() => undefined),
      fix: "",
      random: () => 0,
    });
    await expect(within(waited, 15_000, "the wait")).rejects.toMatchObject({ code: "OKE1096" });
  });
});
