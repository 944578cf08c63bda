// Group commit is bounded: 200 000 callers share statements of at most MAX_GROUP; a failed shared statement falls back one by one, logged, and stops at an outage.
import { describe, expect, it } from "vitest";
import { recordingLogger } from "../../../test/conformance/app-fixture.ts";
import type { PgContext } from "./postgres-context.ts";
import { groupCommit, MAX_GROUP } from "./postgres-group-commit.ts";

/** groupCommit only keys its lanes by the context and logs through it. */
function fakeContext() {
  const { logger, records } = recordingLogger();
  return { ctx: { logger } as unknown as PgContext, records };
}

describe("group commit", () => {
  it("200 000 concurrent callers: every one resolves, no statement carries more than MAX_GROUP", async () => {
    const { ctx } = fakeContext();
    const sizes: number[] = [];
    let singles = 0;
    const send = groupCommit<number, number>({
      what: "numbers",
      maxInFlight: 1,
      single: async (_c, n) => {
        singles++;
        return n;
      },
      batch: async (_c, reqs) => {
        sizes.push(reqs.length);
        // The shape of the enqueue batch's own reduction: a loop, whatever the group's size.
        let max = -Infinity;
        for (const r of reqs) if (r > max) max = r;
        return reqs.map(() => ({ value: max }));
      },
    });
    const all = await Promise.all(Array.from({ length: 200_000 }, (_, i) => send(ctx, i)));
    expect(all).toHaveLength(200_000);
    expect(singles + sizes.reduce((a, b) => a + b, 0)).toBe(200_000);
    expect(sizes.reduce((a, b) => Math.max(a, b), 0)).toBeLessThanOrEqual(MAX_GROUP);
    expect(sizes.length).toBeGreaterThanOrEqual(Math.ceil((200_000 - 1) / MAX_GROUP));
  });

  it("a failed shared statement sends each request alone and logs it; a conflict fails only its caller", async () => {
    const { ctx, records } = fakeContext();
    let hold: () => void = () => undefined;
    const first = new Promise<void>((r) => (hold = r));
    const send = groupCommit<number, number>({
      what: "numbers",
      maxInFlight: 1,
      single: async (_c, n) => {
        if (n === 0) await first;
        if (n === 3) throw new Error("duplicate 3");
        return n * 10;
      },
      batch: async () => {
        throw new Error("shared statement refused");
      },
    });
    const lone = send(ctx, 0);
    await new Promise((r) => setImmediate(r)); // the lone one is in flight; the rest share the next statement
    const group = [1, 2, 3, 4].map((n) =>
      send(ctx, n).then(
        (v) => ({ v }),
        (e: Error) => ({ e: e.message }),
      ),
    );
    hold();
    await lone;
    expect(await Promise.all(group)).toEqual([{ v: 10 }, { v: 20 }, { e: "duplicate 3" }, { v: 40 }]);
    const line = records.find((r) => String(r.msg).startsWith("group commit:"));
    expect(line).toMatchObject({
      level: 40,
      requests: 4,
      msg: "group commit: a shared statement of 4 numbers failed; sending each alone",
    });
  });

  it("an outage during the fallback fails the rest without a round trip each, and says how many", async () => {
    const { ctx, records } = fakeContext();
    let hold: () => void = () => undefined;
    const first = new Promise<void>((r) => (hold = r));
    let sent = 0;
    const down = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const send = groupCommit<number, number>({
      what: "numbers",
      maxInFlight: 1,
      single: async (_c, n) => {
        if (n === 0) {
          await first;
          return 0;
        }
        sent++;
        throw down;
      },
      batch: async () => {
        throw down;
      },
    });
    const lone = send(ctx, 0);
    await new Promise((r) => setImmediate(r)); // the lone one is in flight; the rest share the next statement
    const group = Array.from({ length: 500 }, (_, i) => send(ctx, i + 1).catch((e: Error) => e.message));
    hold();
    await lone;
    expect(new Set(await Promise.all(group))).toEqual(new Set(["connect ECONNREFUSED"]));
    expect(sent).toBe(1);
    expect(records.map((r) => r.msg)).toContain(
      "group commit: the database is unavailable; 499 numbers failed without being sent again",
    );
  });

  it("callers the shared statement answered resolve before other callers' follow-ups run", async () => {
    const { ctx } = fakeContext();
    let release: () => void = () => undefined;
    const slow = new Promise<void>((r) => (release = r));
    const send = groupCommit<number, number>({
      what: "numbers",
      maxInFlight: 1,
      single: async (_c, n) => n,
      // The first caller's outcome is a follow-up statement (held open); the others are answered.
      batch: async (_c, reqs) =>
        reqs.map((n, i) =>
          i === 0
            ? {
                alone: async () => {
                  await slow;
                  return -n;
                },
              }
            : { value: n * 10 },
        ),
    });
    const [first, ...rest] = [1, 2, 3].map((n) => send(ctx, n));
    const answered: number[] = [];
    for (const p of rest) void p.then((v) => answered.push(v));
    // Nothing here waits for I/O: two turns of the event loop run everything that does not wait for
    // the held follow-up.
    for (let turn = 0; turn < 2; turn++) await new Promise((r) => setImmediate(r));
    expect(answered).toEqual([20, 30]);
    release();
    expect(await first).toBe(-1);
  });
});
