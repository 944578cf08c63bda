// wake-rules: when a run is due and to whom, and what a claim or take writes, as tables of state -> answer.
import { describe, expect, it } from "vitest";
import { JournalLeaseBusy, OkeError } from "../errors.ts";
import {
  claimLease,
  dueAtFor,
  dueForClaim,
  leaseLive,
  passedByWalk,
  runDeadline,
  sleepersHorizon,
  takeLease,
  type RunStateOf,
} from "./wake-rules.ts";

const NOW = 1_000;

const run = (over: Partial<RunStateOf>): RunStateOf => ({
  id: "r1",
  status: "running",
  leaseOwner: null,
  leaseExpiresAt: null,
  wakeAt: null,
  recoveries: 0,
  updatedAt: 0,
  ...over,
});

// A sleeper, free or reserved by "a" until 1 500, waking at 1 200.
const sleeper = run({ status: "sleeping", wakeAt: 1_200 });
const reserved = run({ status: "sleeping", wakeAt: 1_200, leaseOwner: "a", leaseExpiresAt: 1_500 });
const heldLive = run({ leaseOwner: "a", leaseExpiresAt: 1_500 });
const heldLapsed = run({ leaseOwner: "a", leaseExpiresAt: 900 });
const released = run({ leaseOwner: null, leaseExpiresAt: null });
const retrying = run({ leaseOwner: null, leaseExpiresAt: 950 });
const completed = run({ status: "completed" });

describe("runDeadline", () => {
  it.each([
    ["a free sleeper: its wake time", sleeper, 1_200],
    ["a reserved sleeper: the later of wake and reservation", reserved, 1_500],
    ["a reservation that ends before the wake: the wake", { ...reserved, leaseExpiresAt: 1_100 }, 1_200],
    ["a sleeper without wake time: never", run({ status: "sleeping" }), null],
    ["a leased run: its lease expiry", heldLive, 1_500],
    ["a compensating run: its lease expiry", run({ status: "compensating", leaseExpiresAt: 1_300 }), 1_300],
    ["a released run: never", released, null],
    ["a released run with a retry time: the retry time", retrying, 950],
    ["a finished run: never", completed, null],
    ["a failed run with a stale expiry: never", run({ status: "failed", leaseExpiresAt: 5 }), null],
  ])("%s", (_, r, want) => {
    expect(runDeadline(r)).toBe(want);
  });
});

describe("dueAtFor and dueForClaim", () => {
  // [what, run, owner, horizon, dueAtFor, dueForClaim]
  it.each([
    ["a free sleeper past the horizon", sleeper, "b", NOW, 1_200, null],
    ["a free sleeper within the horizon", sleeper, "b", 1_200, 1_200, 1_200],
    ["a free sleeper already due", run({ status: "sleeping", wakeAt: 800 }), "b", NOW, 800, 800],
    ["its holder's reservation: due at its wake", reserved, "a", 1_200, 1_200, 1_200],
    ["its holder's reservation, past the horizon", reserved, "a", NOW, 1_200, null],
    ["another's reservation, even within the horizon", reserved, "b", 2_000, 1_500, null],
    ["another's live lease", heldLive, "b", 2_000, 1_500, null],
    ["the holder's own live lease is not due before it lapses", heldLive, "a", 2_000, 1_500, null],
    ["a lapsed lease", heldLapsed, "b", NOW, 900, 900],
    ["a released run", released, "b", 2_000, null, null],
    ["a released run whose retry time passed", retrying, "b", NOW, 950, 950],
    ["a finished run", completed, "b", 2_000, null, null],
  ])("%s", (_, r, owner, horizon, at, claimAt) => {
    expect(dueAtFor(r, owner)).toBe(at);
    expect(dueForClaim(r, owner, NOW, horizon)).toBe(claimAt);
  });

  it("the horizon is sleepersDueBy, never before now", () => {
    expect(sleepersHorizon(NOW, undefined)).toBe(NOW);
    expect(sleepersHorizon(NOW, 500)).toBe(NOW);
    expect(sleepersHorizon(NOW, 1_200)).toBe(1_200);
  });
});

describe("passedByWalk (the ordered walk of due runs)", () => {
  it.each([
    ["a free sleeper ahead of now is claimed ahead", sleeper, 1_200, false],
    ["a reserved sleeper whose reservation is live is passed", reserved, 1_500, true],
    ["a live running lease is passed", heldLive, 1_500, true],
    ["a lapsed lease is taken", heldLapsed, 900, false],
    ["anything due at now is taken", run({ status: "sleeping", wakeAt: NOW }), NOW, false],
  ])("%s", (_, r, deadline, want) => {
    expect(passedByWalk(r, deadline, NOW)).toBe(want);
    expect(leaseLive(r, NOW)).toBe(r.leaseOwner !== null && (r.leaseExpiresAt ?? 0) > NOW);
  });
});

describe("takeLease", () => {
  const lease = { leaseOwner: "b", leaseExpiresAt: NOW + 30, updatedAt: NOW };
  it.each([
    [
      "a sleeper wakes: running, wake time cleared",
      sleeper,
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
    ["a lapsed lease of another: a recovery", heldLapsed, { status: "running", wakeAt: null, recoveries: 1 }],
    [
      "a compensating run keeps its status",
      run({ status: "compensating", leaseOwner: "a", leaseExpiresAt: 900 }),
      { status: "compensating", wakeAt: null, recoveries: 1 },
    ],
    ["a released run: no recovery", released, { status: "running", wakeAt: null, recoveries: 0 }],
    [
      "a released run with a retry time: no recovery",
      retrying,
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
    [
      "the holder renewing its own: no recovery",
      run({ leaseOwner: "b", leaseExpiresAt: 1_500, recoveries: 2 }),
      { status: "running", wakeAt: null, recoveries: 2 },
    ],
    [
      "another's reservation that lapsed before its wake time: no recovery (nothing ran)",
      { ...reserved, leaseExpiresAt: 900 },
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
    [
      "another's reservation that lapsed after its wake time: a recovery (its holder was past the wake)",
      { ...reserved, wakeAt: 800, leaseExpiresAt: 900 },
      { status: "running", wakeAt: null, recoveries: 1 },
    ],
    [
      "another's reservation that lapsed at its wake time: no recovery",
      { ...reserved, wakeAt: 900, leaseExpiresAt: 900 },
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
    [
      "a reservation given back (no owner): no recovery",
      { ...reserved, wakeAt: 800, leaseOwner: null, leaseExpiresAt: null },
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
    [
      "its holder resuming its own reservation: no recovery",
      { ...reserved, leaseOwner: "b" },
      { status: "running", wakeAt: null, recoveries: 0 },
    ],
  ])("%s", (_, r, want) => {
    expect(takeLease(r, "b", NOW, 30)).toEqual({ ...lease, ...want });
  });

  it.each([
    ["another's live lease", heldLive, JournalLeaseBusy, "JournalLeaseBusy"],
    ["another's live reservation", reserved, JournalLeaseBusy, "JournalLeaseBusy"],
    ["a completed run", completed, OkeError, "OKE1310"],
    ["a failed run", run({ status: "failed" }), OkeError, "OKE1310"],
  ])("refuses %s", (_, r, type, code) => {
    const err = (() => {
      try {
        takeLease(r, "b", NOW, 30);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(type);
    expect((err as OkeError).code).toBe(code);
  });
});

describe("claimLease", () => {
  it.each([
    [
      "a sleeper claimed ahead of its wake is reserved: still sleeping, wake kept",
      sleeper,
      "b",
      { status: "sleeping", wakeAt: 1_200, leaseOwner: "b", leaseExpiresAt: NOW + 30 },
    ],
    [
      "a lapsed reservation claimed ahead by another is reserved again",
      { ...reserved, leaseExpiresAt: 900 },
      "b",
      { status: "sleeping", wakeAt: 1_200, leaseOwner: "b", leaseExpiresAt: NOW + 30 },
    ],
    [
      "a reservation that lapsed after its wake is taken, a recovery",
      { ...reserved, wakeAt: 800, leaseExpiresAt: 900 },
      "b",
      { status: "running", wakeAt: null, leaseOwner: "b", leaseExpiresAt: NOW + 30, recoveries: 1 },
    ],
    [
      "its holder's own reservation is resumed (taken)",
      reserved,
      "a",
      { status: "running", wakeAt: null, leaseOwner: "a", leaseExpiresAt: NOW + 30 },
    ],
    [
      "a sleeper due at now is taken",
      run({ status: "sleeping", wakeAt: NOW }),
      "b",
      { status: "running", wakeAt: null, leaseOwner: "b", leaseExpiresAt: NOW + 30 },
    ],
    [
      "a lapsed running lease is taken over",
      heldLapsed,
      "b",
      { status: "running", wakeAt: null, leaseOwner: "b", leaseExpiresAt: NOW + 30, recoveries: 1 },
    ],
  ])("%s", (_, r, owner, want) => {
    expect(claimLease(r, owner, NOW, 30)).toEqual({ recoveries: 0, updatedAt: NOW, ...want });
  });

  it("returns the state only, never the record it was given", () => {
    const s = claimLease({ ...sleeper, extra: 1 } as RunStateOf, "b", NOW, 30);
    expect(Object.keys(s).sort()).toEqual(
      ["leaseExpiresAt", "leaseOwner", "recoveries", "status", "updatedAt", "wakeAt"].sort(),
    );
  });
});
