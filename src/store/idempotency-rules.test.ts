// idempotency-rules: what a claim or a completion of an Idempotency-Key decides and writes, as tables of record -> answer.
import { describe, expect, it } from "vitest";
import type { IdempotencyRecord } from "./idempotency-types.ts";
import { decideClaim, decideComplete, restoredRecord, runningFor } from "./idempotency-rules.ts";

const NOW = 1_000;
const claimReq = { key: "k", fingerprint: "f", runId: "new-run", now: NOW, lockMs: 30, windowMs: 500 };
const completeReq = {
  key: "k",
  fingerprint: "f",
  response: { status: 201, body: '{"ok":true}' },
  now: NOW,
  runId: "new-run",
  windowMs: 500,
};

const rec = (over: Partial<IdempotencyRecord>): IdempotencyRecord => ({
  key: "k",
  fingerprint: "f",
  status: "running",
  response: null,
  runId: "first-run",
  lockedUntil: 1_020,
  createdAt: 900,
  expiresAt: 1_400,
  ...over,
});

const running = rec({});
const lapsed = rec({ lockedUntil: 990 });
const lapsedAtNow = rec({ lockedUntil: NOW });
const done = rec({ status: "done", response: { status: 200, body: null } });
const expired = rec({ status: "done", expiresAt: NOW });
const otherRunning = rec({ fingerprint: "g", lockedUntil: 990 });

const fresh: IdempotencyRecord = {
  key: "k",
  fingerprint: "f",
  status: "running",
  response: null,
  runId: "new-run",
  lockedUntil: NOW + 30,
  createdAt: NOW,
  expiresAt: NOW + 500,
};

describe("decideClaim", () => {
  it.each([
    ["no record: claimed, a new running record", undefined, "claimed", fresh],
    ["an expired record (expiresAt <= now): claimed anew", expired, "claimed", fresh],
    [
      "its running record, lock lapsed: taken over, same run id, locked again",
      lapsed,
      "takenOver",
      { ...lapsed, lockedUntil: NOW + 30 },
    ],
    [
      "its running record, lock lapsing at now: taken over",
      lapsedAtNow,
      "takenOver",
      { ...lapsedAtNow, lockedUntil: NOW + 30 },
    ],
    ["its running record, still locked: existing (busy), nothing written", running, "existing", null],
    ["a done record: existing (replay), nothing written", done, "existing", null],
    ["another request's running record, lock lapsed: existing (mismatch)", otherRunning, "existing", null],
  ])("%s", (_, r, kind, write) => {
    const d = decideClaim(r, claimReq);
    expect(d.claim.kind).toBe(kind);
    expect(d.write).toEqual(write);
    if (d.claim.kind === "takenOver") expect(d.claim.record).toBe(d.write);
    if (d.claim.kind === "existing") expect(d.claim.record).toBe(r);
  });

  it("never changes the record it was given", () => {
    const r = { ...lapsed };
    decideClaim(r, claimReq);
    expect(r).toEqual(lapsed);
  });
});

describe("decideComplete", () => {
  it.each([
    [
      "its running record: completed, done with the response",
      running,
      "completed",
      { ...running, status: "done", response: completeReq.response },
    ],
    [
      "its running record, lock lapsed: completed",
      lapsed,
      "completed",
      { ...lapsed, status: "done", response: completeReq.response },
    ],
    ["no record: restored", undefined, "restored", restoredRecord(completeReq)],
    ["an expired record: restored", expired, "restored", restoredRecord(completeReq)],
    ["a done record: superseded, left as it is", done, "superseded", null],
    ["another request's record: superseded", otherRunning, "superseded", null],
  ])("%s", (_, r, outcome, write) => {
    expect(decideComplete(r, completeReq)).toEqual({ outcome, write });
  });

  it("the restored record is done for the window from now, with the request's run id", () => {
    expect(restoredRecord(completeReq)).toEqual({
      key: "k",
      fingerprint: "f",
      status: "done",
      response: completeReq.response,
      runId: "new-run",
      lockedUntil: NOW,
      createdAt: NOW,
      expiresAt: NOW + 500,
    });
    expect(restoredRecord(completeReq).response).not.toBe(completeReq.response);
  });
});

describe("runningFor", () => {
  it.each([
    ["its running record", running, true],
    ["its running record, lock lapsed", lapsed, true],
    ["a done record", done, false],
    ["another request's", otherRunning, false],
    ["none", undefined, false],
  ])("%s", (_, r, want) => {
    expect(runningFor(r, "f")).toBe(want);
  });
});
