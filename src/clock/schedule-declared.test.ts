// A clock's stored declaration against this instance's code: when it counts as another version's, and what operators are told.
import { describe, expect, it } from "vitest";
import type { ScheduleRecord, ScheduleSpec } from "../store/schedule-types.ts";
import { planReconcile } from "../store/schedule-rules.ts";
import { declaredElsewhere, declaredElsewhereNote } from "./schedule-runtime.ts";

const spec = (s: Partial<ScheduleSpec>): ScheduleSpec => ({ cron: null, every: null, timezone: "UTC", ...s });

const record = (declared: ScheduleSpec, more: Partial<ScheduleRecord> = {}): ScheduleRecord => ({
  name: "reports.daily",
  declared,
  override: null,
  overridable: true,
  flow: "reports.daily",
  description: null,
  paused: false,
  orphaned: false,
  version: 1,
  anchorAt: 0,
  lastSlot: null,
  lastFiredAt: null,
  lastMissedRuns: 0,
  lastError: null,
  createdAt: 0,
  updatedAt: 0,
  ...more,
});

describe("an interval's stored zone", () => {
  it("is no spec change: a clock declared every 2m keeps its anchor and catch-up whatever zone is stored", () => {
    const existing = {
      ...record(spec({ every: "2m", timezone: "Europe/Paris" })),
      anchorAt: 1_000,
      lastSlot: 120_000,
    };
    const changed = planReconcile(
      [existing],
      [
        {
          name: existing.name,
          spec: spec({ every: "2m" }),
          overridable: true,
          flow: existing.flow,
          description: null,
        },
      ],
      10_000_000,
    );
    // Nothing to write: the slots are the same, so the anchor (and the catch-up from lastSlot) stays.
    expect(changed).toEqual([]);
    // A cron's zone is a change, as before.
    const cron = record(spec({ cron: "0 7 * * *", timezone: "Europe/Paris" }));
    expect(
      planReconcile(
        [cron],
        [
          {
            name: cron.name,
            spec: spec({ cron: "0 7 * * *" }),
            overridable: true,
            flow: cron.flow,
            description: null,
          },
        ],
        10_000_000,
      ),
    ).toHaveLength(1);
  });
});

describe("declared elsewhere", () => {
  it("is the stored declaration when it fires other slots than this code's, else undefined", () => {
    const paris = spec({ cron: "0 7 * * *", timezone: "Europe/Paris" });
    expect(declaredElsewhere(record(paris), paris)).toBeUndefined();
    expect(declaredElsewhere(record(paris), spec({ cron: "0 7 * * *" }))).toEqual(paris);
    expect(declaredElsewhere(record(spec({ every: "10s" })), spec({ every: "20s" }))).toEqual(
      spec({ every: "10s" }),
    );
    // An interval's zone means nothing: the same slots, nothing to say.
    expect(
      declaredElsewhere(record(spec({ every: "10s", timezone: "Asia/Tokyo" })), spec({ every: "10s" })),
    ).toBeUndefined();
  });

  it("says what fires when an operator edit is in force, or the clock is paused", () => {
    const code = spec({ every: "20s" });
    expect(declaredElsewhereNote(record(spec({ cron: "0 7 * * *", timezone: "Europe/Paris" })), code)).toBe(
      `the store has cron "0 7 * * *" in Europe/Paris, declared by another instance's code (a different version of the app); ` +
        `this instance's code declares every 20s. The stored cron "0 7 * * *" in Europe/Paris fires now, on every instance: ` +
        `the last instance to boot sets a clock's spec for the whole fleet; finish the deploy, or restart this instance ` +
        `to make its code's spec current`,
    );
    expect(
      declaredElsewhereNote(
        record(spec({ every: "10s" }), { override: spec({ every: "5m" }), paused: true }),
        code,
      ),
    ).toBe(
      `the store has every 10s, declared by another instance's code (a different version of the app); ` +
        `this instance's code declares every 20s. The operator's edit (every 5m) fires once resumed, on every ` +
        `instance, and the stored every 10s after a reset: the last instance to boot sets a clock's spec for the ` +
        `whole fleet; finish the deploy, or restart this instance to make its code's spec current`,
    );
  });
});
