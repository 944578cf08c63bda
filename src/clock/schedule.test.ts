// Clock declarations, cron and interval specs, and DST transitions.
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { dstNotes, transitions } from "./dst.ts";
import { createScheduleOperator } from "./schedule-operator.ts";
import { ScheduleRuntime } from "./schedule-runtime.ts";
import { clock, every } from "./schedule.ts";
import { compileSpec, specProblem } from "./schedule-spec.ts";
import { createTimeTravel } from "./time-travel.ts";

const utc = (s: string): number => Date.parse(s);

describe("clock declarations", () => {
  it("every() is an anonymous interval; clock() a named schedule with defaults", () => {
    expect(every("1h")).toMatchObject({
      kind: "clock",
      name: undefined,
      spec: { cron: null, every: "1h", timezone: "UTC" },
      overridable: false,
      overlap: true,
      retries: 3,
      deadLetter: true,
    });
    expect(
      clock("reports.daily", {
        cron: "0 7 * * mon-fri",
        timezone: "Europe/Paris",
        overridable: true,
        description: "d",
        retries: 1,
        deadLetter: false,
      }),
    ).toMatchObject({
      name: "reports.daily",
      spec: { cron: "0 7 * * mon-fri", every: null, timezone: "Europe/Paris" },
      overridable: true,
      description: "d",
      retries: 1,
      deadLetter: false,
    });
  });

  it("cron XOR every, else a TypeError naming the clock", () => {
    // @ts-expect-error -- cron and every together: ClockOptions refuses it at compile time too
    expect(() => clock("both", { cron: "* * * * *", every: "1m" })).toThrow(
      new TypeError('clock("both"): needs exactly one of cron or every'),
    );
    // @ts-expect-error -- neither cron nor every: ClockOptions refuses it at compile time too
    expect(() => clock("none", {})).toThrow(
      new TypeError('clock("none"): needs exactly one of cron or every'),
    );
  });

  it.each([
    [{ cron: "61 * * * *" }, /clock\("bad"\): cron "61 \* \* \* \*" does not parse/],
    [{ cron: "0 0 * * * *" }, /must have five fields \(m h dom mon dow\), it has 6/],
    [{ cron: "@often" }, /not a known nickname/],
    [{ every: "1w" }, /every "1w" is not a positive duration/],
    [{ every: "0s" }, /not a positive duration/],
    [{ cron: "@daily", timezone: "Mars/Olympus" }, /timezone "Mars\/Olympus" is not an IANA time zone/],
    [{ every: "1h", overridable: "yes" }, /overridable must be a boolean/],
    [{ every: "1h", retries: -1 }, /retries must be a non-negative integer/],
    [{ every: "1h", leaseMs: 5 }, /unknown option "leaseMs"/],
  ])("rejects %j", (options, text) => {
    expect(() => clock("bad", options as never)).toThrow(text);
  });

  it("a cron's bad field is named and quoted as written, not as croner rewrote it", () => {
    const problem = (cron: string) => specProblem({ cron, every: null, timezone: "UTC" });
    expect(() => clock("r", { cron: "0 7 * * mon-fry" })).toThrow(
      new TypeError(
        'clock("r"): cron "0 7 * * mon-fry" does not parse: day-of-week field "mon-fry" is not valid (0-7 or sun-sat)',
      ),
    );
    // croner says "day: 31" and "month: 12" for these: its own message is dropped.
    expect(problem("* * 32 * *")).toBe(
      'cron "* * 32 * *" does not parse: day-of-month field "32" is not valid (1-31 or L)',
    );
    expect(problem("* * * 13 *")).toBe(
      'cron "* * * 13 *" does not parse: month field "13" is not valid (1-12 or jan-dec)',
    );
    expect(problem("0 7 * jam *")).toMatch(/: month field "jam" is not valid \(1-12 or jan-dec\)$/);
    // What croner says of a bad step or range is kept.
    expect(problem("*/0 * * * *")).toBe(
      'cron "*/0 * * * *" does not parse: minute field "*/0" is not valid (0-59): Syntax error, illegal stepping: 0',
    );
    expect(problem("0 17-9 * * *")).toMatch(
      /: hour field "17-9" is not valid \(0-23\): From value is larger than to value/,
    );
  });

  it("a cron that matches no date is refused at declaration", () => {
    for (const cron of ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
      expect(() => clock("never", { cron, timezone: "Europe/Paris" }), cron).toThrow(
        new TypeError(
          `clock("never"): cron "${cron}" never fires: no date matches it (check its day-of-month against its month)`,
        ),
      );
    // Rare is not never: Feb 29 comes every four years; with a weekday too, croner fires on either.
    expect(specProblem({ cron: "0 0 29 2 *", every: null, timezone: "UTC" })).toBeUndefined();
    expect(specProblem({ cron: "0 0 31 2 mon", every: null, timezone: "UTC" })).toBeUndefined();
    // A stored spec that never fires (an edit from before the check) still compiles: no next slot.
    const stored = compileSpec({ cron: "0 0 31 2 *", every: null, timezone: "UTC" });
    expect(stored.next(utc("2026-01-01T00:00:00Z"))).toBeNull();
    expect(stored.latestDue(0, utc("2026-01-01T00:00:00Z"))).toBeNull();
  });

  it("an operator's edit to a cron that never fires is OKE1701, and the spec in force stays", async () => {
    const store = createMemoryStore();
    const rt = new ScheduleRuntime({
      store,
      clock: createTimeTravel(utc("2026-05-01T10:00:00Z")),
      logger: createLogger({ format: "silent" }),
      clocks: [{ name: "r", schedule: clock("r", { cron: "0 7 * * *", overridable: true }), flow: "f.r" }],
    });
    await rt.start();
    try {
      const ops = createScheduleOperator(store, rt);
      const err: unknown = await ops.edit("r", { cron: "0 0 31 2 *" }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OkeError);
      expect(err).toMatchObject({
        code: "OKE1701",
        status: 400,
        message:
          'clock "r": cron "0 0 31 2 *" never fires: no date matches it (check its day-of-month against its month)',
      });
      expect(await ops.get("r")).toMatchObject({ cron: "0 7 * * *", overridden: false });
    } finally {
      await rt.stop();
    }
  });

  it("an unknown nickname's error lists every nickname accepted, and points @every at every", () => {
    const problem = specProblem({ cron: "@every 5m", every: null, timezone: "UTC" });
    expect(problem).toBe(
      'cron "@every 5m" is not a known nickname (@yearly @annually @monthly @weekly @daily @midnight @hourly); an interval is every: "5m", not a cron',
    );
    for (const nick of problem!.slice(problem!.indexOf("(") + 1, problem!.indexOf(")")).split(" "))
      expect(specProblem({ cron: nick, every: null, timezone: "UTC" }), nick).toBeUndefined();
    expect(specProblem({ cron: "@often", every: null, timezone: "UTC" })).toBe(
      'cron "@often" is not a known nickname (@yearly @annually @monthly @weekly @daily @midnight @hourly)',
    );
  });

  it("accepts steps, ranges, lists, names and nicknames", () => {
    for (const cron of [
      "*/15 9-17 * * 1-5",
      "0,30 * 1,15 jan,jul *",
      "0 0 * * sun",
      "@hourly",
      "@daily",
      "@weekly",
      "@monthly",
      "@yearly",
      "@annually",
      "@midnight",
      "@DAILY",
    ])
      expect(specProblem({ cron, every: null, timezone: "UTC" }), cron).toBeUndefined();
  });
});

describe("slot maths", () => {
  it("every: slots are multiples of the interval since the epoch; latestDue counts the interval", () => {
    const c = compileSpec({ cron: null, every: "1s", timezone: "UTC" });
    expect(c.next(1_500)).toBe(2_000);
    expect(c.next(2_000)).toBe(3_000);
    expect(c.latestDue(2_000, 2_999)).toBeNull();
    expect(c.latestDue(2_000, 3_000)).toEqual({ slot: 3_000, count: 1 });
    expect(c.latestDue(2_000, 12_500)).toEqual({ slot: 12_000, count: 10 });
  });

  it("cron: next and latest due in the schedule's zone", () => {
    const c = compileSpec({ cron: "0 7 * * *", every: null, timezone: "Europe/Paris" });
    expect(c.next(utc("2026-06-01T00:00:00Z"))).toBe(utc("2026-06-01T05:00:00Z"));
    expect(c.latestDue(utc("2026-06-01T00:00:00Z"), utc("2026-06-04T06:00:00Z"))).toEqual({
      slot: utc("2026-06-04T05:00:00Z"),
      count: 4,
    });
  });

  it("DST gap: a daily 02:30 in New York fires at the next valid instant (03:00 EDT)", () => {
    const c = compileSpec({ cron: "30 2 * * *", every: null, timezone: "America/New_York" });
    expect(c.next(utc("2026-03-07T12:00:00Z"))).toBe(utc("2026-03-08T07:00:00Z"));
    expect(c.next(utc("2026-03-08T07:00:00Z"))).toBe(utc("2026-03-09T06:30:00Z"));
  });

  it("DST gap: every fire of a cron whose local time does not exist runs at the gap's end, together once", () => {
    // New York, 2026-03-08: 02:00–03:00 local does not exist; 03:00 EDT is 07:00Z.
    const fires = (cron: string, from: string, to: string): string[] => {
      const c = compileSpec({ cron, every: null, timezone: "America/New_York" });
      const out: string[] = [];
      for (let t = c.next(utc(from)); t !== null && t <= utc(to); t = c.next(t))
        out.push(new Date(t).toISOString().slice(11, 16));
      return out;
    };
    const day = (cron: string) => fires(cron, "2026-03-08T04:00:00Z", "2026-03-09T04:00:00Z");
    expect(day("30 2 * * *")).toEqual(["07:00"]);
    expect(day("0,30 2 * * *")).toEqual(["07:00"]);
    expect(day("*/15 2 * * *")).toEqual(["07:00"]);
    expect(day("15,45 2 * * *")).toEqual(["07:00"]);
    expect(day("30 2,14 * * *")).toEqual(["07:00", "18:30"]);
    expect(day("30 2-3 * * *")).toEqual(["07:00", "07:30"]);
    expect(day("30 1-2 * * *")).toEqual(["06:30", "07:00"]);
    expect(day("0 2,3 * * *")).toEqual(["07:00"]);
    // Days before and after are untouched.
    expect(fires("*/15 2 * * *", "2026-03-07T04:00:00Z", "2026-03-08T04:00:00Z")).toEqual([
      "07:00",
      "07:15",
      "07:30",
      "07:45",
    ]);
    expect(fires("0,30 2 * * *", "2026-03-09T04:00:00Z", "2026-03-10T04:00:00Z")).toEqual(["06:00", "06:30"]);
    // Other zones' gaps: Santiago's midnight (00:00 → 01:00), Lord Howe's half hour (02:00 → 02:30).
    const santiago = compileSpec({ cron: "*/20 0 * * *", every: null, timezone: "America/Santiago" });
    expect(santiago.next(utc("2026-09-06T00:00:00Z"))).toBe(utc("2026-09-06T04:00:00Z"));
    expect(santiago.next(utc("2026-09-06T04:00:00Z"))).toBe(utc("2026-09-07T03:00:00Z"));
    const howe = compileSpec({ cron: "0,15,45 2 * * *", every: null, timezone: "Australia/Lord_Howe" });
    expect(howe.next(utc("2026-10-03T12:00:00Z"))).toBe(utc("2026-10-03T15:30:00Z"));
    expect(howe.next(utc("2026-10-03T15:30:00Z"))).toBe(utc("2026-10-03T15:45:00Z"));
    // latestDue counts the merged fire once.
    const q = compileSpec({ cron: "*/15 2 * * *", every: null, timezone: "America/New_York" });
    expect(q.latestDue(utc("2026-03-08T04:00:00Z"), utc("2026-03-08T12:00:00Z"))).toEqual({
      slot: utc("2026-03-08T07:00:00Z"),
      count: 1,
    });
  });

  it("DST overlap: a daily 01:30 in New York fires once", () => {
    const c = compileSpec({ cron: "30 1 * * *", every: null, timezone: "America/New_York" });
    const first = c.next(utc("2026-10-31T12:00:00Z"));
    expect(first).toBe(utc("2026-11-01T05:30:00Z"));
    expect(c.next(first!)).toBe(utc("2026-11-02T06:30:00Z"));
  });

  it("finds the zone's transitions and notes crons that meet them", () => {
    const from = utc("2026-01-01T00:00:00Z");
    expect(transitions("America/New_York", from).map((t) => [t.kind, new Date(t.at).toISOString()])).toEqual([
      ["gap", "2026-03-08T07:00:00.000Z"],
      ["overlap", "2026-11-01T06:00:00.000Z"],
    ]);
    expect(transitions("UTC", from)).toEqual([]);
    const ny = (cron: string) => dstNotes({ cron, every: null, timezone: "America/New_York" }, from);
    expect(ny("30 2 * * *")).toEqual([
      'cron "30 2 * * *" in America/New_York meets a DST gap on 2026-03-08 (local 02:00–03:00 does not exist): the fire at 02:30 runs at 03:00, the next valid instant',
    ]);
    expect(ny("0,30 2 * * *")).toEqual([
      expect.stringMatching(
        /DST gap on 2026-03-08 .*: the fires at 02:00, 02:30 run once, at 03:00, the next valid instant$/,
      ),
    ]);
    expect(ny("* 2 * * *")).toEqual([
      expect.stringMatching(/the fires at 02:00, 02:01, 02:02 … 02:59 run once, at 03:00/),
    ]);
    expect(ny("30 2-3 * * *")).toEqual([expect.stringMatching(/the fire at 02:30 runs at 03:00/)]);
    expect(ny("30 1 * * *")).toEqual([
      expect.stringMatching(/DST overlap on 2026-11-01 \(local 01:00–02:00/),
    ]);
    expect(ny("0 12 * * *")).toEqual([]);
    expect(dstNotes({ cron: null, every: "1h", timezone: "America/New_York" }, from)).toEqual([]);
  });

  // Boots are never on a whole minute: the transitions and notes must not carry the boot's seconds.
  describe("DST notes from a `now` that is not on a whole minute", () => {
    const iso = (t: number) => new Date(t).toISOString();
    const wall = (t: number) => new Date(t).toISOString().slice(0, 16);
    const shape = (tz: string, now: string) =>
      transitions(tz, utc(now)).map((t) => [t.kind, iso(t.at), wall(t.from), wall(t.to)]);
    const notes = (tz: string, cron: string, now: string) =>
      dstNotes({ cron, every: null, timezone: tz }, utc(now));

    it.each(["2026-12-04T20:35:17.123Z", "2026-12-04T20:35:59.999Z", "2026-12-04T20:35:00.000Z"])(
      "Europe/Paris from %s",
      (now) => {
        expect(shape("Europe/Paris", now)).toEqual([
          ["gap", "2027-03-28T01:00:00.000Z", "2027-03-28T02:00", "2027-03-28T03:00"],
          ["overlap", "2027-10-31T01:00:00.000Z", "2027-10-31T02:00", "2027-10-31T03:00"],
        ]);
        expect(notes("Europe/Paris", "0 2 * * *", now)).toEqual([
          'cron "0 2 * * *" in Europe/Paris meets a DST gap on 2027-03-28 (local 02:00–03:00 does not exist): the fire at 02:00 runs at 03:00, the next valid instant',
          expect.stringMatching(
            /^cron "0 2 \* \* \*" in Europe\/Paris meets a DST overlap on 2027-10-31 \(local 02:00–03:00 happens twice\)/,
          ),
        ]);
        expect(notes("Europe/Paris", "0 3 * * *", now)).toEqual([]);
        expect(notes("Europe/Paris", "59 1 * * *", now)).toEqual([]);
        expect(notes("Europe/Paris", "59 2 * * *", now)).toHaveLength(2);
        expect(notes("Europe/Paris", "* * * * *", now)[0]).toMatch(
          /: the fires at 02:00, 02:01, 02:02 … 02:59 run once, at 03:00, the next valid instant$/,
        );
      },
    );

    it("America/New_York: gap 02:00–03:00 in March, overlap 01:00–02:00 in November", () => {
      const now = "2026-01-01T00:00:17.123Z";
      expect(shape("America/New_York", now)).toEqual([
        ["gap", "2026-03-08T07:00:00.000Z", "2026-03-08T02:00", "2026-03-08T03:00"],
        ["overlap", "2026-11-01T06:00:00.000Z", "2026-11-01T01:00", "2026-11-01T02:00"],
      ]);
      expect(notes("America/New_York", "0 2 * * *", now)).toEqual([
        expect.stringMatching(
          /DST gap on 2026-03-08 .*: the fire at 02:00 runs at 03:00, the next valid instant$/,
        ),
      ]);
      expect(notes("America/New_York", "0 1 * * *", now)).toEqual([
        expect.stringMatching(/DST overlap on 2026-11-01 \(local 01:00–02:00 happens twice\)/),
      ]);
      expect(notes("America/New_York", "0 3 * * *", now)).toEqual([]);
      // From just before the gap: still found, to the minute.
      expect(notes("America/New_York", "0 2 * * *", "2026-03-08T06:59:59.500Z")).toEqual([
        expect.stringMatching(
          /DST gap on 2026-03-08 \(local 02:00–03:00 does not exist\): the fire at 02:00 runs/,
        ),
      ]);
    });

    it("Australia/Lord_Howe: a half-hour shift, gap 02:00–02:30 in October, overlap 01:30–02:00 in April", () => {
      const now = "2026-01-01T00:00:41.007Z";
      expect(shape("Australia/Lord_Howe", now)).toEqual([
        ["overlap", "2026-04-04T15:00:00.000Z", "2026-04-05T01:30", "2026-04-05T02:00"],
        ["gap", "2026-10-03T15:30:00.000Z", "2026-10-04T02:00", "2026-10-04T02:30"],
      ]);
      expect(notes("Australia/Lord_Howe", "15 2 * * *", now)).toEqual([
        'cron "15 2 * * *" in Australia/Lord_Howe meets a DST gap on 2026-10-04 (local 02:00–02:30 does not exist): the fire at 02:15 runs at 02:30, the next valid instant',
      ]);
      expect(notes("Australia/Lord_Howe", "45 1 * * *", now)).toEqual([
        expect.stringMatching(/DST overlap on 2026-04-05 \(local 01:30–02:00 happens twice\)/),
      ]);
      expect(notes("Australia/Lord_Howe", "30 2 * * *", now)).toEqual([]);
      expect(notes("Australia/Lord_Howe", "29 1 * * *", now)).toEqual([]);
    });

    it("the slot maths agree from an unaligned instant", () => {
      const paris = compileSpec({ cron: "0 2 * * *", every: null, timezone: "Europe/Paris" });
      expect(paris.next(utc("2027-03-27T20:35:17.123Z"))).toBe(utc("2027-03-28T01:00:00Z"));
      const howe = compileSpec({ cron: "15 2 * * *", every: null, timezone: "Australia/Lord_Howe" });
      expect(howe.next(utc("2026-10-03T09:12:41.007Z"))).toBe(utc("2026-10-03T15:30:00Z"));
    });
  });
});

describe("a zone given with every", () => {
  it("is a TypeError at declaration: an interval's slots are UTC, whatever zone is written", () => {
    // @ts-expect-error -- a zone with every: ClockOptions refuses it at compile time too
    expect(() => clock("x.daily", { every: "1d", timezone: "Europe/Paris" })).toThrow(
      'clock("x.daily"): timezone applies to cron only; every("1d") slots are multiples of the interval since the epoch, in UTC',
    );
    expect(() => clock("x.daily", { every: "1d" })).not.toThrow();
  });
});

describe("an interval too long to ever fire", () => {
  it("is a TypeError at declaration, as a cron that never fires is", () => {
    expect(() => every("1000000000000d")).toThrow(
      'every "1000000000000d" never fires: its first slot is past the year 275760',
    );
    expect(() => every("36500d")).not.toThrow();
  });
});
