// During a store outage the retrying loops (worker claims, wake scheduler, clock) log once per outage at warn, not an error per tick.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../test/conformance/app-fixture.ts";
import { createApp, createTimeTravel, every, flow, on, signal } from "../index.ts";
import type { StoreHealth } from "./health-types.ts";
import { createMemoryStore } from "./memory/memory-store.ts";
import type { Store } from "./types.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A memory store whose loop calls fail as a database outage does while `since` is set (its health down). */
function outageStore() {
  const inner = createMemoryStore();
  const store = Object.create(inner) as Store;
  const calls = { claim: 0, wake: 0, clock: 0 };
  let since: number | undefined;
  const refused = (): Promise<never> =>
    Promise.reject(Object.assign(new Error("connect ECONNREFUSED 10.0.0.9:5432"), { code: "ECONNREFUSED" }));
  store.health = (): StoreHealth =>
    since === undefined ? { ok: true } : { ok: false, since, reason: "refused" };
  store.isUnavailable = (e) => (e as { code?: unknown }).code === "ECONNREFUSED";
  store.claim = (q) => (calls.claim++, since === undefined ? inner.claim(q) : refused());
  store.claimDueRuns = (q) => (calls.wake++, since === undefined ? inner.claimDueRuns(q) : refused());
  store.fireBatch = (r) => (calls.clock++, since === undefined ? inner.fireBatch(r) : refused());
  store.listSchedules = () => (since === undefined ? inner.listSchedules() : refused());
  return { store, inner, calls, down: (at: number | undefined) => (since = at) };
}

describe("loop failure logs during a store outage", () => {
  it("one warn per loop per outage, no error line and no stack; a new outage warns again", async () => {
    const clock = createTimeTravel(Date.UTC(2030, 0, 1));
    const t = outageStore();
    const lines: Array<{ level: number; msg: string; err?: unknown }> = [];
    const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const jobs = signal.once("outage.jobs");
    const done: string[] = [];
    const work = on(jobs, flow("outage.work", { do: () => void done.push("ran") }));
    const nap = flow("outage.nap", { durable: true, do: (_: unknown, fx) => fx.clock.sleep("nap", "2s") });
    const tick = on(every("1s"), flow("outage.tick", { do: () => undefined }));
    const app = createApp({
      modules: [{ jobs, work, nap, tick }],
      env: "test",
      store: t.store,
      clock,
      logger,
    });
    cleanups.push(() => app.stop({ timeoutMs: 1_000 }));
    await app.boot();
    expect(await app.invoke(nap, {})).toBeUndefined(); // parked until +2 s

    const loops = ["claim failed", "wake scheduler: claim failed", "clock: schedule check failed"];
    const logged = (msg: string): number => lines.filter((l) => l.msg.startsWith(msg)).length;
    /** Advances the app clock a second at a time, each time once every loop logged its next failure (its retry armed). */
    const failTicks = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const before = loops.map(logged);
        clock.advance(1_000);
        await until(
          () => loops.every((m, j) => logged(m) > before[j]!),
          `every loop failed again (tick ${i})`,
        );
      }
    };
    const of = (msg: string, level: number) =>
      lines.filter((l) => l.level === level && l.msg.startsWith(msg));

    t.down(1);
    await app.emit(jobs, {}); // wakes the pool: its claim fails
    clock.advance(2_000); // the nap is due: the wake scheduler's claim fails
    await until(() => loops.every((m) => logged(m) > 0), "every loop failed once");
    await failTicks(5);
    for (const msg of loops) {
      expect(of(msg, 50), msg).toHaveLength(0);
      expect(of(msg, 40), msg).toHaveLength(1);
      expect(of(msg, 40)[0]!.err, msg).toBeUndefined(); // the error's text, not its stack
      expect(of(msg, 20).length, msg).toBeGreaterThanOrEqual(4);
    }
    expect(of("claim failed", 40)[0]!.msg).toContain("store unavailable: connect ECONNREFUSED 10.0.0.9:5432");

    t.down(undefined);
    clock.advance(1_000);
    await until(() => done.length === 1, "the job ran once the store was back");

    expect(await app.invoke(nap, {})).toBeUndefined(); // parked again
    const first = loops.map(logged);
    t.down(2); // a second outage
    await app.emit(jobs, {});
    clock.advance(2_000);
    await until(() => loops.every((m, j) => logged(m) > first[j]!), "every loop failed in the second outage");
    await failTicks(3);
    for (const msg of loops) {
      expect(of(msg, 40), msg).toHaveLength(2);
      expect(of(msg, 50), msg).toHaveLength(0);
    }
    t.down(undefined);
  });

  it("a claim failure that is not an outage still logs at error with its stack", async () => {
    const clock = createTimeTravel(Date.UTC(2030, 0, 1));
    const t = outageStore();
    const bug = new TypeError("claim is broken");
    t.store.claim = () => (t.calls.claim++, Promise.reject(bug));
    const lines: Array<{ level: number; msg: string; err?: { stack?: string } }> = [];
    const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const jobs = signal.once("outage.bug");
    const work = on(jobs, flow("outage.bugwork", { do: () => undefined }));
    const app = createApp({ modules: [{ jobs, work }], env: "test", store: t.store, clock, logger });
    cleanups.push(() => app.stop({ timeoutMs: 1_000 }));
    await app.boot();
    await app.emit(jobs, {});
    await until(() => lines.some((l) => l.msg === "claim failed; retrying on the next wake-up"), "logged");
    const line = lines.find((l) => l.msg === "claim failed; retrying on the next wake-up")!;
    expect(line.level).toBe(50);
    expect(line.err?.stack).toContain("claim is broken");
  });
});
