// Clock declarations, cron and interval specs, and DST transitions.
import { describe, expect, it } from "vitest";
import { dstNotes, transitions } from "./dst.ts";
import { clock, every } from "./schedule.ts";
import { compileSpec, specProblem } from "./schedule-spec.ts";

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
    expect(() => clock("both", { cron: "* * * * *", every: "1m" })).toThrow(
      new TypeError('clock("both"): needs exactly one of cron or every'),
    );
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
});
