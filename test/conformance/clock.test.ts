// Schedules on every driver: due slots fire under time travel, catch-up, pause, trigger.
import { describe, expect, it } from "vitest";
import {
  clock,
  ClockResourceNotFoundError,
  every,
  flow,
  on,
  ScheduleNotOverridableError,
  type ClockInput,
} from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const utc = (s: string): number => Date.parse(s);
const H = 3_600_000;

/** A module with an hourly cron and a per-minute interval; fires land in `log`. */
function clocks(log: ClockInput[], o: { overridable?: boolean; fail?: boolean } = {}) {
  return {
    hourly: on(
      clock("reports.hourly", { cron: "0 * * * *", overridable: o.overridable ?? false, retries: 0 }),
      flow("reports.hourly", {
        do: (input: ClockInput) => {
          log.push(input);
          if (o.fail) throw new Error("report failed");
        },
      }),
    ),
    minutely: on(
      every("1m"),
      flow("ticks.minute", {
        do: (input) => {
          log.push(input);
        },
      }),
    ),
  };
}

for (const driver of drivers) {
  describe(`clock on ${driver.name}`, () => {
    const apps = appFactory(driver);

    it("time travel fires due slots; the flow learns its slot; an every() is named after its flow", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:59:30Z"));
      const app = await apps.make([clocks(log)], { time });
      time.advance("30s");
      await app.idle();
      expect(log.map((x) => [x.clock, x.scheduledAt, x.missedRuns]).sort()).toEqual([
        ["reports.hourly", utc("2026-05-01T11:00:00Z"), 0],
        ["ticks.minute", utc("2026-05-01T11:00:00Z"), 0],
      ]);
      expect(log.every((x) => x.firedAt === utc("2026-05-01T11:00:00Z"))).toBe(true);
      time.advance("1m");
      await app.idle();
      expect(log.filter((x) => x.clock === "ticks.minute")).toHaveLength(2);
      const list = await app.operator.schedules.list();
      expect(list.map((s) => [s.name, s.flow, s.nextFireAt])).toEqual([
        ["reports.hourly", "reports.hourly", utc("2026-05-01T12:00:00Z")],
        ["ticks.minute", "ticks.minute", utc("2026-05-01T11:02:00Z")],
      ]);
    });

    it("catch-up one: after downtime one fire for the latest missed slot, with missedRuns", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:30:00Z"));
      const store = await apps.store();
      const first = await apps.make([clocks(log)], { time, store });
      await first.stop();
      time.advance("5h");
      const second = await apps.make([clocks(log)], { time, store });
      await second.idle();
      const hourly = log.filter((x) => x.clock === "reports.hourly");
      expect(hourly).toEqual([
        {
          clock: "reports.hourly",
          scheduledAt: utc("2026-05-01T15:00:00Z"),
          firedAt: utc("2026-05-01T15:30:00Z"),
          missedRuns: 4,
        },
      ]);
      expect(log.filter((x) => x.clock === "ticks.minute")).toEqual([
        expect.objectContaining({ scheduledAt: utc("2026-05-01T15:30:00Z"), missedRuns: 299 }),
      ]);
      const view = await second.operator.schedules.get("reports.hourly");
      expect(view).toMatchObject({
        missedRuns: 4,
        lagMs: 30 * 60_000,
        lastScheduledAt: utc("2026-05-01T15:00:00Z"),
      });
    });

    it("two instances on one store fire each slot once", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:00:30Z"));
      const store = await apps.store();
      const a = await apps.make([clocks(log)], { time, store });
      const b = await apps.make([clocks(log)], { time, store });
      for (let i = 0; i < 5; i++) {
        time.advance("1m");
        await Promise.all([a.idle(), b.idle()]);
      }
      const minute = log.filter((x) => x.clock === "ticks.minute").map((x) => x.scheduledAt);
      expect(minute).toEqual([1, 2, 3, 4, 5].map((m) => utc("2026-05-01T10:00:00Z") + m * 60_000));
    });

    it("pause stops fires and survives a restart; resume skips the paused slots", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:30:00Z"));
      const store = await apps.store();
      const first = await apps.make([clocks(log)], { time, store });
      expect(await first.operator.schedules.pause("reports.hourly")).toMatchObject({
        paused: true,
        nextFireAt: null,
      });
      await first.stop();
      const second = await apps.make([clocks(log)], { time, store });
      time.advance("3h");
      await second.idle();
      expect(log.filter((x) => x.clock === "reports.hourly")).toEqual([]);
      expect(await second.operator.schedules.resume("reports.hourly")).toMatchObject({
        paused: false,
        nextFireAt: utc("2026-05-01T14:00:00Z"),
      });
      time.advance("1h");
      await second.idle();
      expect(log.filter((x) => x.clock === "reports.hourly")).toEqual([
        expect.objectContaining({ scheduledAt: utc("2026-05-01T14:00:00Z"), missedRuns: 0 }),
      ]);
    });

    it("edit: only overridable clocks, the edit fires and survives a restart; unknown names are not found", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:30:00Z"));
      const store = await apps.store();
      const app = await apps.make([clocks(log, { overridable: true })], { time, store });
      const ops = app.operator.schedules;
      await expect(ops.edit("ticks.minute", { every: "5m" })).rejects.toThrow(
        new ScheduleNotOverridableError("ticks.minute"),
      );
      await expect(ops.edit("ticks.minute", { every: "5m" })).rejects.toThrow(
        'clock "ticks.minute" is not overridable',
      );
      await expect(ops.edit("reports.hourly", { cron: "0 * * *" })).rejects.toMatchObject({
        code: "OKE1701",
        status: 400,
      });
      for (const call of [
        () => ops.get("nope"),
        () => ops.pause("nope"),
        () => ops.edit("nope", { every: "1h" }),
        () => ops.trigger("nope"),
      ]) {
        const err = await call().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ClockResourceNotFoundError);
        expect((err as Error).message).toBe('cron "nope" not found');
      }
      const edited = await ops.edit("reports.hourly", { cron: "15 * * * *", timezone: "Asia/Kolkata" });
      expect(edited).toMatchObject({ cron: "15 * * * *", timezone: "Asia/Kolkata", overridden: true });
      expect(edited.declared).toEqual({ cron: "0 * * * *", every: null, timezone: "UTC" });
      await app.stop();
      // A restart keeps the operator's edit (it wins over the code until reset).
      const again = await apps.make([clocks(log, { overridable: true })], { time, store });
      time.advance("1h");
      await again.idle();
      const hourly = log.filter((x) => x.clock === "reports.hourly").map((x) => x.scheduledAt);
      // 15 past in Kolkata (UTC+5:30) is 45 past in UTC.
      expect(hourly).toEqual(
        [utc("2026-05-01T10:45:00Z"), utc("2026-05-01T11:45:00Z")].slice(0, hourly.length),
      );
      expect(hourly.length).toBeGreaterThan(0);
      expect(await again.operator.schedules.reset("reports.hourly")).toMatchObject({
        cron: "0 * * * *",
        overridden: false,
      });
    });

    it("trigger fires now without moving the schedule; a failed fire is the schedule's last error", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:30:00Z"));
      const app = await apps.make([clocks(log, { fail: true })], { time });
      const t = await app.operator.schedules.trigger("reports.hourly");
      expect(t).toMatchObject({ clock: "reports.hourly", scheduledAt: time.now() });
      await app.idle();
      expect(log).toEqual([
        { clock: "reports.hourly", scheduledAt: time.now(), firedAt: time.now(), missedRuns: 0 },
      ]);
      const v = await app.operator.schedules.get("reports.hourly");
      expect(v.lastScheduledAt).toBeNull();
      expect(v.lastError).toMatchObject({ code: "Error", message: "report failed", slot: time.now() });
      expect(await app.deadLetters({ name: "clock:reports.hourly" } as never)).toHaveLength(1);
    });

    it("lastError: the retry that succeeds after a failed attempt clears it", async () => {
      const attempts: number[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:59:30Z"));
      const mod = {
        flaky: on(
          clock("flaky", { every: "1h", retries: 2 }),
          flow("flaky", {
            do: (_i: ClockInput, fx) => {
              attempts.push(fx.attempt);
              if (fx.attempt === 1) throw new Error("first attempt fails");
            },
          }),
        ),
      };
      const app = await apps.make([mod], { time });
      time.advance("30s");
      await app.idle();
      // The retry's back-off (if any) is time-travelled through in steps; no wall-clock wait.
      for (let i = 0; i < 60 && attempts.length < 2; i++) {
        time.advance("10s");
        await app.idle();
      }
      expect(attempts).toEqual([1, 2]);
      expect((await app.operator.schedules.get("flaky")).lastError).toBeNull();
    });

    it("lastError: two instances, a later slot's success clears it whichever instance recorded it", async () => {
      const outcomes: string[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:00:30Z"));
      const store = await apps.store();
      const mod = () => ({
        c: on(
          clock("flaky.minute", { every: "1m", retries: 0 }),
          flow("flaky.minute", {
            do: (i: ClockInput) => {
              const fail = i.scheduledAt === utc("2026-05-01T10:01:00Z");
              outcomes.push(fail ? "failed" : "ok");
              if (fail) throw new Error("slot failed");
            },
          }),
        ),
      });
      const a = await apps.make([mod()], { time, store });
      const b = await apps.make([mod()], { time, store });
      const view = () => a.operator.schedules.get("flaky.minute");
      time.advance("30s");
      await Promise.all([a.idle(), b.idle()]);
      expect(outcomes).toEqual(["failed"]);
      expect((await view()).lastError).toMatchObject({ message: "slot failed" });
      // Settle both instances once more: the wake the error sent has made each re-read it.
      await Promise.all([a.idle(), b.idle()]);
      for (let m = 2; m <= 4; m++) {
        time.advance("1m");
        await Promise.all([a.idle(), b.idle()]);
        expect((await view()).lastError, `after slot ${m}`).toBeNull();
        expect(await b.operator.schedules.get("flaky.minute")).toMatchObject({ lastError: null });
      }
      expect(outcomes).toEqual(["failed", "ok", "ok", "ok"]);
    });

    it("reconcile at boot: a clock no longer declared is orphaned with its history, not fired", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-05-01T10:59:00Z"));
      const store = await apps.store();
      const first = await apps.make([clocks(log)], { time, store });
      time.advance("1m");
      await first.idle();
      await first.stop();
      const { minutely } = clocks(log);
      const second = await apps.make([{ minutely }], { time, store });
      time.advance("2h");
      await second.idle();
      const views = await second.operator.schedules.list();
      expect(views.find((v) => v.name === "reports.hourly")).toMatchObject({
        orphaned: true,
        nextFireAt: null,
        lastScheduledAt: utc("2026-05-01T11:00:00Z"),
      });
      expect(log.filter((x) => x.clock === "reports.hourly")).toHaveLength(1);
      await expect(second.operator.schedules.trigger("reports.hourly")).rejects.toMatchObject({
        code: "OKE1702",
      });
    });

    it("DST: a daily cron in a gap fires at the next valid instant, in an overlap once", async () => {
      const log: ClockInput[] = [];
      const time = createTimeTravel(utc("2026-03-07T12:00:00Z"));
      const mod = {
        gap: on(
          clock("nightly.gap", { cron: "30 2 * * *", timezone: "America/New_York" }),
          flow("nightly.gap", { do: (i: ClockInput) => void log.push(i) }),
        ),
        overlap: on(
          clock("nightly.overlap", { cron: "30 1 * * *", timezone: "America/New_York" }),
          flow("nightly.overlap", { do: (i: ClockInput) => void log.push(i) }),
        ),
      };
      const app = await apps.make([mod], { time });
      expect((await app.operator.schedules.get("nightly.gap")).dstNotes[0]).toMatch(/DST gap on 2026-03-08/);
      for (let h = 0; h < 48; h++) {
        time.advance("1h");
        await app.idle();
      }
      expect(
        log.filter((x) => x.clock === "nightly.gap").map((x) => new Date(x.scheduledAt).toISOString()),
      ).toEqual(["2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"]);
      // The jump itself catches up once (for the latest slot passed); the overlap is what follows.
      const from = utc("2026-10-31T12:00:00Z");
      time.set(from);
      await app.idle();
      for (let h = 0; h < 44; h++) {
        time.advance("1h");
        await app.idle();
      }
      expect(
        log
          .filter((x) => x.clock === "nightly.overlap" && x.scheduledAt > from)
          .map((x) => new Date(x.scheduledAt).toISOString()),
      ).toEqual(["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"]);
    });

    it("DST: crons with several fires in the gap hour fire once at its end; the fall-back day is untouched", async () => {
      const log: ClockInput[] = [];
      const crons = {
        single: "30 2 * * *",
        list: "0,30 2 * * *",
        step: "*/15 2 * * *",
        hours: "30 2,14 * * *",
        range: "30 2-3 * * *",
      };
      const mod = Object.fromEntries(
        Object.entries(crons).map(([k, cron]) => [
          k,
          on(
            clock(`dst.${k}`, { cron, timezone: "America/New_York" }),
            flow(`dst.${k}`, { do: (i: ClockInput) => void log.push(i) }),
          ),
        ]),
      );
      const time = createTimeTravel(utc("2026-03-08T04:00:00Z"));
      const app = await apps.make([mod], { time });
      // Steps of 15 minutes (no slot is more frequent), so each fire is seen on its own, not caught up.
      const walk = async (from: string, steps: number): Promise<Record<string, string[]>> => {
        const start = utc(from);
        if (time.now() !== start) {
          time.set(start);
          await app.idle();
        }
        for (let i = 0; i < steps; i++) {
          time.advance("15m");
          await app.idle();
        }
        const out: Record<string, string[]> = {};
        for (const k of Object.keys(crons))
          out[k] = log
            .filter((x) => x.clock === `dst.${k}` && x.scheduledAt > start)
            .map((x) => new Date(x.scheduledAt).toISOString().slice(11, 16));
        return out;
      };
      // 2026-03-08: 02:00–03:00 local does not exist; 03:00 EDT is 07:00Z.
      expect(await walk("2026-03-08T04:00:00Z", 64)).toEqual({
        single: ["07:00"],
        list: ["07:00"],
        step: ["07:00"],
        hours: ["07:00", "18:30"],
        range: ["07:00", "07:30"],
      });
      expect(log.every((x) => x.missedRuns === 0)).toBe(true);
      // 2026-11-01: 01:00–02:00 happens twice, 02:00 EST is 07:00Z: these crons fire as on any day.
      expect(await walk("2026-11-01T04:00:00Z", 64)).toEqual({
        single: ["07:30"],
        list: ["07:00", "07:30"],
        step: ["07:00", "07:15", "07:30", "07:45"],
        hours: ["07:30", "19:30"],
        range: ["07:30", "08:30"],
      });
    });

    it("a durable clock flow runs under the slot's id; fx.clock.ago/fromNow/duration use the injected clock", async () => {
      const seen: Array<{ runId: string; ago: number; fromNow: number; d: number }> = [];
      const time = createTimeTravel(utc("2026-05-01T10:59:59Z"));
      const mod = {
        d: on(
          every("1s"),
          flow("ticks.durable", {
            durable: true,
            do: async (_input, fx) => {
              await fx.step("s", () => 1);
              seen.push({
                runId: fx.runId,
                ago: fx.clock.ago("7d"),
                fromNow: fx.clock.fromNow("1h"),
                d: fx.clock.duration("2m"),
              });
            },
          }),
        ),
      };
      const app = await apps.make([mod], { time });
      time.advance("1s");
      await app.idle();
      const now = utc("2026-05-01T11:00:00Z");
      expect(seen).toEqual([
        { runId: `clock:ticks.durable:${now}`, ago: now - 7 * 24 * H, fromNow: now + H, d: 120_000 },
      ]);
      expect(await app.store.getRun(`clock:ticks.durable:${now}`)).toMatchObject({ status: "completed" });
    });
  });
}
