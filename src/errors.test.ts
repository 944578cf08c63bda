// OkeError.passing (which refusals say "the same request may succeed a little later": an Idempotency-Key is then freed, not answered), and errorRecord, which never throws whatever was thrown.
import { describe, expect, it } from "vitest";
import {
  JournalLeaseBusy,
  OkeError,
  ScheduleNotOverridableError,
  ClockResourceNotFoundError,
  errorRecord,
} from "./errors.ts";
import { storeErrors } from "./store/index.ts";
import { httpErrors } from "./http/envelope.ts";
import { idempotencyErrors } from "./http/idempotency.ts";
import { consoleErrors } from "./console/auth.ts";

describe("OkeError.passing", () => {
  it.each([
    ["JournalLeaseBusy: the run is leased by another holder", new JournalLeaseBusy("r1"), true],
    ["OKE1503 not ready", httpErrors.notReady(), true],
    ["OKE1604 too many sign-ins: try again in n s", consoleErrors.tooManyFailures(30), true],
    ["OKE1442 still running: answers about another request's key", idempotencyErrors.inProgress(), false],
    ["OKE1441 key reused for another request", idempotencyErrors.mismatch(), false],
    ["OKE1310 run terminal", storeErrors.runTerminal("r1", "completed"), false],
    ["OKE1312 duplicate journal seq", storeErrors.duplicateSeq("r1", 3), false],
    ["OKE1313 journal entry differs", storeErrors.entryDiffers("r1", 3, "step", "s"), false],
    ["a clock that is not overridable", new ScheduleNotOverridableError("c"), false],
    ["a missing run", new ClockResourceNotFoundError("r1"), false],
    ["an OkeError by default, even a 409", new OkeError({ code: "X", message: "x", status: 409 }), false],
    ["an OkeError that says so", new OkeError({ code: "X", message: "x", status: 409, passing: true }), true],
  ])("%s", (_, e, want) => {
    expect(e.passing).toBe(want);
  });
});

describe("errorRecord", () => {
  it("records any thrown value, even one String() cannot convert", () => {
    const bare = Object.assign(Object.create(null) as object, { reason: "nope" });
    expect(errorRecord(bare)).toEqual({ code: "Error", message: '{"reason":"nope"}' });
    const hostile = {
      toString() {
        throw new Error("no");
      },
      toJSON() {
        throw new Error("no");
      },
    };
    expect(errorRecord(hostile)).toEqual({ code: "Error", message: "[object Object]" });
    expect(errorRecord("plain text")).toEqual({ code: "Error", message: "plain text" });
    expect(errorRecord(42)).toEqual({ code: "Error", message: "42" });
  });

  it("records an Error whose message or name is not a string", () => {
    const e = new Error("x");
    (e as unknown as { message: unknown }).message = { detail: 1 };
    expect(errorRecord(e)).toEqual({ code: "Error", message: "[object Object]" });
  });
});
