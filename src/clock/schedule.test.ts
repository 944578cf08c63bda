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
    expect(ny("30 2 * * *")).toEqual([expect.stringMatching(/DST gap on 2026-03-08 \(local 02:00–03:00/)]);
    expect(ny("30 1 * * *")).toEqual([
      expect.stringMatching(/DST overlap on 2026-11-01 \(local 01:00–02:00/),
    ]);
    expect(ny("0 12 * * *")).toEqual([]);
    expect(dstNotes({ cron: null, every: "1h", timezone: "America/New_York" }, from)).toEqual([]);
  });
});
