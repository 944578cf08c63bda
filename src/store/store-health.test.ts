// The health monitor measures outages on the monotonic clock and says when calls stall; loopFailureLog logs a retrying loop once per outage.
import { afterEach, describe, expect, it, vi } from "vitest";
import { gate } from "../../test/conformance/app-fixture.ts";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createHealthMonitor, loopFailureLog } from "./store-health.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("health monitor and host clock steps", () => {
  it("says how long the store was down, not that plus a 40 s step of the host clock", async () => {
    const clock = hostClockSteps();
    const back = gate<{ downMs: number }>();
    const outage = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const monitor = createHealthMonitor({
      name: "test",
      probe: () => Promise.resolve(),
      isOutage: () => true,
      minDelayMs: 10,
      logger: {
        warn: () => undefined,
        info: (obj) => back.open(obj as { downMs: number }),
      },
    });
    try {
      const before = clock.wall();
      monitor.failed(outage);
      const down = monitor.health();
      // `since` is the wall clock's reading: the host's clock as it was.
      expect(down.ok === false && down.since >= before).toBe(true);
      clock.step(40_000);
      const { downMs } = await within(back.promise, 15_000, "the probe");
      expect(monitor.health()).toEqual({ ok: true });
      expect(downMs).toBeGreaterThanOrEqual(0);
      expect(downMs).toBeLessThan(15_000);
    } finally {
      monitor.stop();
    }
  });
});

describe("loopFailureLog: a retrying loop's failures during a store outage", () => {
  const outage = (): Error =>
    Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
  function setup(store: { down?: number; classify?: boolean }) {
    const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = [];
    const at =
      (level: string) =>
      (obj: object, msg?: string): void =>
        void lines.push({ level, msg: msg ?? "", obj: obj as Record<string, unknown> });
    const s = {
      since: undefined as number | undefined,
      health: () =>
        s.since === undefined ? { ok: true as const } : { ok: false as const, since: s.since, reason: "x" },
      isUnavailable: (e: unknown) => (e as { code?: string }).code === "ECONNREFUSED",
    };
    s.since = store.down;
    const log = loopFailureLog(store.classify === false ? { health: s.health } : s, {
      error: at("error"),
      warn: at("warn"),
      debug: at("debug"),
    });
    return { s, lines, log, levels: () => lines.map((l) => l.level) };
  }

  it("one warn per outage, without a stack; the rest of the outage at debug", () => {
    const t = setup({ down: 1_000 });
    for (let i = 0; i < 5; i++) t.log(outage(), { signal: "q" }, "claim failed");
    expect(t.levels()).toEqual(["warn", "debug", "debug", "debug", "debug"]);
    expect(t.lines[0]!.msg).toMatch(/^claim failed \(store unavailable: connect ECONNREFUSED/);
    expect(t.lines[0]!.obj).toEqual({ signal: "q", error: "connect ECONNREFUSED 127.0.0.1:5432" });
    // The store came back, then went down again: a new outage, a new warn.
    t.s.since = 2_000;
    t.log(outage(), {}, "claim failed");
    t.log(outage(), {}, "claim failed");
    expect(t.levels().slice(5)).toEqual(["warn", "debug"]);
  });

  it("an error that is not the outage still logs at error with the error, even during an outage", () => {
    const t = setup({ down: 1_000 });
    const bug = new TypeError("x is not a function");
    t.log(bug, { signal: "q" }, "claim failed");
    expect(t.lines).toEqual([{ level: "error", msg: "claim failed", obj: { signal: "q", err: bug } }]);
    const healthy = setup({});
    healthy.log(bug, {}, "claim failed");
    expect(healthy.levels()).toEqual(["error"]);
  });

  it("a store that cannot classify errors: its health says whether a failure is the outage", () => {
    const t = setup({ down: 1_000, classify: false });
    t.log(new Error("disk full"), {}, "clock: schedule check failed");
    t.log(new Error("disk full"), {}, "clock: schedule check failed");
    expect(t.levels()).toEqual(["warn", "debug"]);
    const up = setup({ classify: false });
    up.log(new Error("boom"), {}, "clock: schedule check failed");
    expect(up.levels()).toEqual(["error"]);
  });
});

describe("health monitor: calls the store is up for but never answers (stalls)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup(stallWarnMs: number, probeFails = false) {
    vi.useFakeTimers({
      toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "performance"],
    });
    const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = [];
    const monitor = createHealthMonitor({
      name: "postgres",
      probe: () => (probeFails ? Promise.reject(new Error("still down")) : Promise.resolve()),
      isOutage: (e) => (e as { code?: string }).code === "ECONNREFUSED",
      stallWarnMs,
      stallHint: "pg_stat_activity shows what they wait on",
      logger: {
        warn: (obj, msg) =>
          lines.push({ level: "warn", msg: msg ?? "", obj: obj as Record<string, unknown> }),
        info: (obj, msg) =>
          lines.push({ level: "info", msg: msg ?? "", obj: obj as Record<string, unknown> }),
      },
    });
    return { monitor, lines };
  }

  it("says once which calls wait past the bound, again each minute, and when they answer", async () => {
    const { monitor, lines } = setup(10_000);
    try {
      const lock = gate<void>();
      const calls = [
        monitor.watch(lock.promise, "enqueue"),
        monitor.watch(lock.promise, "enqueue"),
        monitor.watch(lock.promise, "settle"),
      ];
      // A call that answers at once is no stall, and one not named is not watched.
      await monitor.watch(Promise.resolve(1), "claim");
      void monitor.watch(new Promise(() => undefined));
      await vi.advanceTimersByTimeAsync(9_000);
      expect(lines).toEqual([]);
      await vi.advanceTimersByTimeAsync(3_000);
      expect(lines).toHaveLength(1);
      expect(lines[0]!.level).toBe("warn");
      expect(lines[0]!.msg).toMatch(
        /^postgres store: 3 call\(s\) unanswered for 1\d s or more \(enqueue ×2, settle\); the store is up but does not answer them — a lock another session holds, or an overloaded server\. pg_stat_activity shows what they wait on$/,
      );
      expect(lines[0]!.obj).toMatchObject({ waiting: 3, calls: "enqueue ×2, settle" });
      // Not once per check: again a minute later.
      await vi.advanceTimersByTimeAsync(30_000);
      expect(lines).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(31_000);
      expect(lines).toHaveLength(2);
      expect(lines[1]!.msg).toMatch(/unanswered for 7\d s or more/);
      lock.open();
      await Promise.all(calls);
      await vi.advanceTimersByTimeAsync(3_000);
      expect(lines).toHaveLength(3);
      expect(lines[2]!.level).toBe("info");
      expect(lines[2]!.msg).toMatch(/^postgres store calls answer again; the longest waited 7\d{4} ms$/);
      // Quiet again: nothing more is said.
      await vi.advanceTimersByTimeAsync(60_000);
      expect(lines).toHaveLength(3);
    } finally {
      monitor.stop();
    }
  });

  it("says it again as soon as twice as many calls wait as it last said, never once per check", async () => {
    const { monitor, lines } = setup(2_000);
    try {
      const lock = gate<void>();
      // One emit a second: the first is past the bound alone, the rest pile up behind it.
      for (let i = 0; i < 5; i++) {
        void monitor.watch(lock.promise, "enqueue");
        await vi.advanceTimersByTimeAsync(1_000);
      }
      await vi.advanceTimersByTimeAsync(4_000);
      expect(lines.map((l) => [l.obj.waiting, l.obj.calls])).toEqual([
        [1, "enqueue"],
        [2, "enqueue ×2"],
        [4, "enqueue ×4"],
      ]);
      lock.open();
      await vi.advanceTimersByTimeAsync(1_000);
      expect(lines.at(-1)!.level).toBe("info");
    } finally {
      monitor.stop();
    }
  });

  it("says nothing of a stall during an outage (the outage is said), and nothing with the bound at 0", async () => {
    const { monitor, lines } = setup(1_000, true);
    try {
      monitor.failed(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
      const waiting = monitor.watch(new Promise(() => undefined), "claim");
      void waiting;
      await vi.advanceTimersByTimeAsync(1_500);
      // The outage's own line only.
      expect(lines.map((l) => l.msg.split(" (")[0])).toEqual(["postgres store unavailable"]);
    } finally {
      monitor.stop();
    }
    const off = setup(0);
    try {
      void off.monitor.watch(new Promise(() => undefined), "claim");
      await vi.advanceTimersByTimeAsync(120_000);
      expect(off.lines).toEqual([]);
    } finally {
      off.monitor.stop();
    }
  });
});
