// sharedRead: a slow read is shared by concurrent callers and reused for a multiple of its duration; a fast one runs for every caller.
import { describe, expect, it } from "vitest";
import { sharedRead } from "./shared-read.ts";

/** A read whose duration the test sets on the fake clock; each call returns its call number. */
function harness(takesMs: number) {
  let t = 0;
  let calls = 0;
  const pending: Array<() => void> = [];
  const read = () =>
    new Promise<number>((resolve) => {
      const n = ++calls;
      pending.push(() => {
        t += takesMs;
        resolve(n);
      });
    });
  return {
    shared: sharedRead(read, { now: () => t, slowMs: 50, reuseFactor: 10 }),
    finishAll: () => {
      for (const f of pending.splice(0)) f();
    },
    advance: (ms: number) => (t += ms),
    calls: () => calls,
  };
}

describe("sharedRead", () => {
  it("a fast read (under slowMs) runs for every caller, concurrent or not", async () => {
    const h = harness(5);
    const first = [h.shared(), h.shared()];
    h.finishAll();
    expect(await Promise.all(first)).toEqual([1, 2]);
    const third = h.shared();
    h.finishAll();
    expect(await third).toBe(3);
  });

  it("once a read was slow, callers join the read in flight and reuse its result for 10× its duration", async () => {
    const h = harness(300);
    const first = h.shared();
    h.finishAll();
    expect(await first).toBe(1);
    // 300 ms read: reused until 3 000 ms after it ended.
    h.advance(2_999);
    expect(await h.shared()).toBe(1);
    expect(h.calls()).toBe(1);
    h.advance(1);
    const [a, b, c] = [h.shared(), h.shared(), h.shared()];
    expect(h.calls()).toBe(2);
    h.finishAll();
    expect(await Promise.all([a, b, c])).toEqual([2, 2, 2]);
  });

  it("a failed read is not kept: the next caller reads again", async () => {
    let fail = true;
    let t = 0;
    const shared = sharedRead(
      async () => {
        t += 400;
        if (fail) throw new Error("store down");
        return "counts";
      },
      { now: () => t },
    );
    await expect(shared()).rejects.toThrow("store down");
    fail = false;
    expect(await shared()).toBe("counts");
  });
});
