// journal-rules: who may write a run's journal, and what park, finish, release, renew, compensation and an early wake write, as tables of state -> answer.
import { describe, expect, it } from "vitest";
import { JournalLeaseBusy } from "../errors.ts";
import type { SleepEntry } from "./types.ts";
import {
  assertHolder,
  compensateState,
  finishState,
  parkState,
  releaseState,
  renewState,
  wakeEarlyState,
} from "./journal-rules.ts";
import type { RunStateOf } from "./wake-rules.ts";

const NOW = 1_000;

const run = (over: Partial<RunStateOf>): RunStateOf => ({
  id: "r1",
  status: "running",
  leaseOwner: "a",
  leaseExpiresAt: 1_030,
  wakeAt: null,
  recoveries: 2,
  updatedAt: 0,
  ...over,
});

describe("assertHolder", () => {
  it.each([
    ["the holder of a live lease", run({}), "a", true],
    ["the holder whose lease lapsed, before anyone took it over", run({ leaseExpiresAt: 900 }), "a", true],
    ["the holder of a compensating run", run({ status: "compensating" }), "a", true],
    ["another instance", run({}), "b", false],
    ["anyone, on a released run", run({ leaseOwner: null, leaseExpiresAt: null }), "a", false],
    [
      "a sleeper's reserver (a reservation is no write lease)",
      run({ status: "sleeping", wakeAt: 1_200 }),
      "a",
      false,
    ],
    ["anyone, on a finished run", run({ status: "completed", leaseOwner: "a" }), "a", false],
  ])("%s: %s", (_, r, owner, accepted) => {
    if (accepted) expect(() => assertHolder(r, owner)).not.toThrow();
    else expect(() => assertHolder(r, owner)).toThrow(JournalLeaseBusy);
  });
});

describe("parkState", () => {
  const entry = (wakeAt: number | undefined): SleepEntry =>
    ({ runId: "r1", seq: 3, kind: "sleep", label: "nap", duration: "1s", wakeAt, at: NOW }) as SleepEntry;
  it.each([
    ["sleeps until the entry's wake time", 2_000, 2_000],
    ["a sleep journaled without a wake time wakes at once", undefined, NOW],
  ])("%s", (_, wakeAt, want) => {
    expect(parkState(run({}), { runId: "r1", owner: "a", now: NOW, entry: entry(wakeAt) })).toEqual({
      status: "sleeping",
      wakeAt: want,
      leaseOwner: null,
      leaseExpiresAt: null,
      recoveries: 2,
      updatedAt: NOW,
    });
  });
});

describe("finishState", () => {
  const base = { runId: "r1", owner: "a", now: NOW };
  it.each([
    [
      "completed: no error",
      { ...base, status: "completed" as const, output: { n: 1 } },
      "completed",
      undefined,
    ],
    [
      "failed: the error's code and message only",
      {
        ...base,
        status: "failed" as const,
        error: { code: "E1", message: "boom", stack: "at …" } as { code: string; message: string },
      },
      "failed",
      { code: "E1", message: "boom" },
    ],
  ])("%s", (_, req, status, error) => {
    const out = finishState(run({}), req);
    expect(out.state).toEqual({
      status,
      wakeAt: null,
      leaseOwner: null,
      leaseExpiresAt: null,
      recoveries: 2,
      updatedAt: NOW,
    });
    expect(out.error).toStrictEqual(error);
  });
});

describe("releaseState", () => {
  it.each([
    ["a running run: lease dropped, never due", run({}), undefined, null],
    ["a running run with a retry time: due then", run({}), 1_500, 1_500],
    ["a compensating run with a retry time: due then", run({ status: "compensating" }), 1_500, 1_500],
    [
      "a sleeper's reservation: dropped, the retry time ignored (its wake time decides)",
      run({ status: "sleeping", wakeAt: 1_200 }),
      1_500,
      null,
    ],
  ])("%s", (_, r, retryAt, expiry) => {
    expect(releaseState(r, { runId: "r1", owner: "a", now: NOW, retryAt })).toEqual({
      status: r.status,
      wakeAt: r.wakeAt,
      leaseOwner: null,
      leaseExpiresAt: expiry,
      recoveries: 2,
      updatedAt: NOW,
    });
  });
});

describe("renewState", () => {
  it("moves the lease to now + leaseMs, nothing else", () => {
    expect(renewState(run({}), { now: NOW, leaseMs: 30 })).toEqual({
      status: "running",
      wakeAt: null,
      leaseOwner: "a",
      leaseExpiresAt: NOW + 30,
      recoveries: 2,
      updatedAt: NOW,
    });
  });
});

describe("compensateState", () => {
  const req = { runId: "r1", owner: "a", now: NOW, error: { code: "E1", message: "boom" } };
  it("running -> compensating, lease kept, the failure's code and message become the error", () => {
    expect(compensateState(run({}), req)).toEqual({
      state: {
        status: "compensating",
        wakeAt: null,
        leaseOwner: "a",
        leaseExpiresAt: 1_030,
        recoveries: 2,
        updatedAt: NOW,
      },
      error: { code: "E1", message: "boom" },
    });
  });
  it("refuses a run that is not running (already compensating) with JournalLeaseBusy", () => {
    expect(() => compensateState(run({ status: "compensating" }), req)).toThrow(JournalLeaseBusy);
  });
});

describe("wakeEarlyState", () => {
  const sleeping = (wakeAt: number | null) =>
    run({ status: "sleeping", wakeAt, leaseOwner: null, leaseExpiresAt: null });
  it.each([
    ["a sleeper due later wakes now", sleeping(5_000), NOW],
    ["a sleeper already due keeps its earlier wake time", sleeping(900), 900],
    ["a sleeper without wake time wakes now", sleeping(null), NOW],
  ])("%s", (_, r, wakeAt) => {
    expect(wakeEarlyState(r, NOW)).toEqual({ ...r, id: undefined, wakeAt, updatedAt: NOW });
  });
  it.each([
    ["running", run({})],
    ["completed", run({ status: "completed" })],
  ])("a %s run is not woken", (_, r) => {
    expect(wakeEarlyState(r, NOW)).toBeNull();
  });
});
