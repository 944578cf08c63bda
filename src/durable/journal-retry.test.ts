// retryJournalWrite: the first try runs outside the retry loop; what happens after it fails is unchanged.
import { describe, expect, it } from "vitest";
import { JournalLeaseBusy, OkeError } from "../errors.ts";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { isTransient, retryJournalWrite } from "./journal-retry.ts";

function deps() {
  const { logger, records } = recordingLogger();
  const at = (level: number) => records.filter((r) => r.level === level);
  return {
    d: { clock: { now: () => Date.now(), at: () => () => undefined }, logger, leaseMs: 30_000 },
    /** The retry warnings logged so far: attempt and delay. */
    warned: () => at(40).map((r) => ({ attempt: r.attempt, retryInMs: r.retryInMs })),
    /** The error lines logged so far. */
    errors: () => at(50).map((r) => r.msg),
  };
}

describe("retryJournalWrite", () => {
  it("returns the first try's value without retrying", async () => {
    const { d, warned } = deps();
    const attempts: number[] = [];
    const v = await retryJournalWrite(d, "journal append", "r1", (attempt) => {
      attempts.push(attempt);
      return Promise.resolve("ok");
    });
    expect(v).toBe("ok");
    expect(attempts).toEqual([1]);
    expect(warned()).toEqual([]);
  });

  it("retries transient failures with attempts numbered from the first try and growing delays", async () => {
    const { d, warned } = deps();
    const attempts: number[] = [];
    const v = await retryJournalWrite(d, "journal append", "r1", (attempt) => {
      attempts.push(attempt);
      return attempt < 3 ? Promise.reject(new Error("connection reset")) : Promise.resolve(attempt);
    });
    expect(v).toBe(3);
    expect(attempts).toEqual([1, 2, 3]);
    expect(warned()).toEqual([
      { attempt: 1, retryInMs: 50 },
      { attempt: 2, retryInMs: 100 },
    ]);
  });

  it("throws a refusal at once, on the first try or a later one", async () => {
    const { d, warned } = deps();
    const busy = new JournalLeaseBusy("r1");
    await expect(retryJournalWrite(d, "finish", "r1", () => Promise.reject(busy))).rejects.toBe(busy);
    expect(warned()).toEqual([]);
    const bad = new OkeError({ code: "OKE1301", message: "refused" });
    let n = 0;
    await expect(
      retryJournalWrite(d, "finish", "r1", () => Promise.reject(++n === 1 ? new Error("reset") : bad)),
    ).rejects.toBe(bad);
    expect(n).toBe(2);
  });

  it("gives up when the lease is lost after a transient failure, and says how many tries it made", async () => {
    const { d, warned, errors } = deps();
    const lost = new JournalLeaseBusy("r1");
    let tries = 0;
    await expect(
      retryJournalWrite(
        d,
        "journal append",
        "r1",
        () => {
          tries++;
          return Promise.reject(new Error("reset"));
        },
        () => (tries >= 2 ? lost : undefined),
      ),
    ).rejects.toBe(lost);
    expect(tries).toBe(2);
    expect(warned()).toEqual([{ attempt: 1, retryInMs: 50 }]);
    expect(errors()).toEqual([
      "durable run: journal append given up (the lease was lost); the run resumes from its journal once its lease runs out",
    ]);
  });
});

describe("isTransient", () => {
  const pgError = (code: string): Error => Object.assign(new Error(`pg ${code}`), { code });

  it("retries connection loss, shutdowns, resource shortage, serialization failures and plain errors", () => {
    for (const code of ["08006", "57P01", "53300", "40001", "40P01", "XX000"])
      expect(isTransient(pgError(code))).toBe(true);
    expect(isTransient(Object.assign(new Error("connect"), { code: "ECONNREFUSED" }))).toBe(true);
    expect(isTransient(new Error("boom"))).toBe(true);
  });

  it("does not retry what no retry changes: data exceptions, integrity violations, syntax or access errors", () => {
    for (const code of ["22003", "22P02", "23505", "23514", "42P01", "42501"])
      expect(isTransient(pgError(code))).toBe(false);
    expect(isTransient(new JournalLeaseBusy("r1"))).toBe(false);
  });

  it("does not retry programming errors: better-sqlite3 refusing to bind a value, a value out of range", () => {
    expect(
      isTransient(new TypeError("SQLite3 can only bind numbers, strings, bigints, buffers, and null")),
    ).toBe(false);
    expect(isTransient(new RangeError("The supplied SQL string contains no statements"))).toBe(false);
  });
});
