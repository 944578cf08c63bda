/** Conformance: every claim counts as an attempt, so a claim can tell that a crashed or hung message spent its budget. */
import { describe, expect, it } from "vitest";
import type { ClaimedMessage, Settlement } from "../types.ts";
import { claimOf, freshStore, msg, T0, type StoreFactory } from "./harness.ts";

// What the worker pool does (src/signal/attempt-budget.ts), restated here so the store layer imports nothing above it.
const SIGNAL = { name: "sig.a", retries: 2, deadLetter: true };
const budgetSpent = (c: ClaimedMessage, s: { retries: number }): boolean => c.attempts > s.retries + 1;
const spentSettlement = (
  c: ClaimedMessage,
  s: { name: string; retries: number; deadLetter: boolean },
  worker: string,
  now: number,
): Settlement => ({
  id: c.id,
  worker,
  attempt: c.attempts,
  status: s.deadLetter ? "dead" : "delivered",
  failure: {
    code: "LEASE_EXPIRED",
    message: `attempt ${c.attempts - 1} of "${s.name}" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all ${s.retries + 1} attempts are spent`,
    at: now,
    attempt: c.attempts - 1,
  },
});

export function attemptBudgetCases(factory: StoreFactory): void {
  describe("attempt budget across lost leases", () => {
    const store = freshStore(factory);

    it("each reclaim of an expired lease counts; the claim past the budget settles it dead and frees its key", async () => {
      await store().enqueue([msg("m1", { key: "k" }), msg("m2", { key: "k" })], T0);
      let now = T0;
      // retries: 2 → three attempts, each one lost (the holder crashed: no settle).
      for (let attempt = 1; attempt <= 3; attempt++) {
        const got = await claimOf(store(), `w${attempt}`, now, 10, "sig.a", 1_000);
        expect(got.map((c) => [c.id, c.attempts])).toEqual([["m1", attempt]]);
        expect(budgetSpent(got[0]!, SIGNAL)).toBe(false);
        now += 1_000;
      }
      const [past] = await claimOf(store(), "w4", now, 10, "sig.a", 1_000);
      expect(past).toMatchObject({ id: "m1", attempts: 4 });
      expect(budgetSpent(past!, SIGNAL)).toBe(true);
      const res = await store().settle([spentSettlement(past!, SIGNAL, "w4", now)], now);
      expect(res.applied).toEqual(["m1"]);
      const dead = await store().getMessage("m1");
      expect(dead).toMatchObject({ status: "dead", lockedBy: null });
      expect(dead!.failures).toEqual([
        {
          code: "LEASE_EXPIRED",
          message:
            'attempt 3 of "sig.a" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all 3 attempts are spent',
          at: now,
          attempt: 3,
        },
      ]);
      // The key's next message is released at once.
      const next = await claimOf(store(), "w5", now, 10, "sig.a", 1_000);
      expect(next.map((c) => [c.id, c.attempts])).toEqual([["m2", 1]]);
    });

    it("with deadLetter: false the spent message is delivered, not dead", async () => {
      await store().enqueue([msg("m1")], T0);
      const s = { ...SIGNAL, retries: 0, deadLetter: false };
      await claimOf(store(), "w1", T0, 10, "sig.a", 1_000);
      const [past] = await claimOf(store(), "w2", T0 + 1_000, 10, "sig.a", 1_000);
      expect(budgetSpent(past!, s)).toBe(true);
      await store().settle([spentSettlement(past!, s, "w2", T0 + 1_000)], T0 + 1_000);
      expect(await store().getMessage("m1")).toMatchObject({ status: "delivered" });
      expect((await store().deadLetters("sig.a")).length).toBe(0);
    });

    it("the late holder of a lost attempt cannot undo the spent settlement", async () => {
      await store().enqueue([msg("m1")], T0);
      const s = { ...SIGNAL, retries: 0 };
      const [first] = await claimOf(store(), "w1", T0, 10, "sig.a", 1_000);
      const [past] = await claimOf(store(), "w2", T0 + 1_000, 10, "sig.a", 1_000);
      await store().settle([spentSettlement(past!, s, "w2", T0 + 1_000)], T0 + 1_000);
      const late = await store().settle(
        [{ id: "m1", worker: first!.lockedBy, attempt: first!.attempts, status: "delivered" }],
        T0 + 2_000,
      );
      expect(late.applied).toEqual([]);
      expect(await store().getMessage("m1")).toMatchObject({ status: "dead" });
    });
  });
}
