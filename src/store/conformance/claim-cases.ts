/** Conformance cases of enqueue and claim: stored shape, eligibility, exclusivity, lazy reclaim. */
import { describe, expect, it } from "vitest";
import {
  claimOf,
  freshStore,
  ids,
  idsOf,
  LEASE,
  msg,
  outcome,
  sortedIds,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** Enqueue and claim: what a stored message looks like, eligibility, exclusivity, lazy reclaim. */
export function claimCases(factory: StoreFactory, options: ConformanceOptions): void {
  describe("enqueue and claim", () => {
    const store = freshStore(factory);

    it("stores a new message as pending with no attempts", async () => {
      await store().enqueue(
        [msg("m1", { key: "k", payload: { to: "a@x", n: [1, 2] }, parentRunId: "run-9" })],
        T0,
      );
      expect(await store().getMessage("m1")).toEqual({
        id: "m1",
        signal: "sig.a",
        key: "k",
        payload: { to: "a@x", n: [1, 2] },
        parentRunId: "run-9",
        status: "pending",
        attempts: 0,
        failures: [],
        lockedBy: null,
        leaseExpiresAt: null,
        createdAt: T0,
        updatedAt: T0,
      });
      expect(await store().getMessage("nope")).toBeUndefined();
    });

    it("open is idempotent", async () => {
      await store().open();
      await store().open();
      await store().enqueue([msg("m1")], T0);
      expect(idsOf(await claimOf(store(), "w", T0))).toEqual(["m1"]);
    });

    it("claim stamps inflight, lockedBy, leaseExpiresAt = now + leaseMs and attempts + 1 before returning", async () => {
      await store().enqueue([msg("m1", { payload: { hello: "world" }, parentRunId: "run-1" })], T0);
      const got = await store().claim({
        signal: "sig.a",
        worker: "w1",
        max: 10,
        now: T0 + 5,
        leaseMs: 1_000,
      });
      expect(got).toEqual([
        {
          id: "m1",
          signal: "sig.a",
          key: null,
          payload: { hello: "world" },
          parentRunId: "run-1",
          attempts: 1,
          createdAt: T0,
          lockedBy: "w1",
          leaseExpiresAt: T0 + 1_005,
        },
      ]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        lockedBy: "w1",
        leaseExpiresAt: T0 + 1_005,
        attempts: 1,
        updatedAt: T0 + 5,
      });
    });

    it("payloads are copies: mutating the emitted or the claimed object changes nothing stored", async () => {
      const payload = { list: [1, 2], nested: { a: 1 } };
      await store().enqueue([msg("m1", { payload })], T0);
      payload.list.push(3);
      payload.nested.a = 99;
      const [c] = await claimOf(store(), "w", T0);
      (c!.payload as { list: number[] }).list.push(4);
      const read = await store().getMessage("m1");
      (read!.payload as { nested: { a: number } }).nested.a = 5;
      read!.failures.push({ code: "x", message: "x", at: 0, attempt: 0 });
      expect(await store().getMessage("m1")).toMatchObject({
        payload: { list: [1, 2], nested: { a: 1 } },
        failures: [],
      });
    });

    it("respects max and never hands the same message out twice", async () => {
      await store().enqueue(
        ids("m", 10).map((id) => msg(id)),
        T0,
      );
      const a = await claimOf(store(), "w1", T0, 3);
      const b = await claimOf(store(), "w2", T0, 3);
      const c = await claimOf(store(), "w3", T0, 10);
      expect(a).toHaveLength(3);
      expect(b).toHaveLength(3);
      expect(c).toHaveLength(4);
      expect(sortedIds([...a, ...b, ...c])).toEqual(ids("m", 10));
      expect(await claimOf(store(), "w4", T0, 10)).toEqual([]);
      expect(await claimOf(store(), "w5", T0, 0)).toEqual([]);
    });

    it("claims only the requested signal; other signals stay untouched", async () => {
      await store().enqueue(
        [msg("a1"), msg("b1", { signal: "sig.b" }), msg("a2"), msg("b2", { signal: "sig.b" })],
        T0,
      );
      expect(sortedIds(await claimOf(store(), "w", T0, 10, "sig.a"))).toEqual(["a1", "a2"]);
      expect(await store().getMessage("b1")).toMatchObject({
        status: "pending",
        attempts: 0,
        lockedBy: null,
      });
      expect(await claimOf(store(), "w", T0, 10, "sig.unknown")).toEqual([]);
      expect(sortedIds(await claimOf(store(), "w", T0, 10, "sig.b"))).toEqual(["b1", "b2"]);
    });

    it("each message is claimed exactly once among concurrent claimers", async () => {
      const all = ids("m", 100);
      await store().enqueue(
        all.map((id) => msg(id)),
        T0,
      );
      const seen: string[] = [];
      for (let round = 0; round < 50; round++) {
        const batches = await Promise.all(
          [1, 2, 3, 4, 5].map((w) =>
            store().claim({ signal: "sig.a", worker: `w${w}`, max: 7, now: T0, leaseMs: LEASE }),
          ),
        );
        const got = batches.flat();
        if (got.length === 0) break;
        for (const c of got) seen.push(c.id);
        await store().settle(
          got.map((c) => outcome(c, "delivered")),
          T0,
        );
      }
      expect(seen).toHaveLength(100);
      expect([...seen].sort()).toEqual(all);
    });

    it("an inflight message is not eligible before leaseExpiresAt, and is reclaimed at it", async () => {
      await store().enqueue([msg("m1")], T0);
      await store().claim({ signal: "sig.a", worker: "w1", max: 1, now: T0, leaseMs: 500 });
      expect(await claimOf(store(), "w2", T0 + 499)).toEqual([]);
      const again = await store().claim({
        signal: "sig.a",
        worker: "w2",
        max: 1,
        now: T0 + 500,
        leaseMs: 500,
      });
      expect(again).toMatchObject([{ id: "m1", attempts: 2, lockedBy: "w2", leaseExpiresAt: T0 + 1_000 }]);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "inflight",
        lockedBy: "w2",
        attempts: 2,
      });
    });

    it("reclaims expired leases and pending messages in one claim, up to max", async () => {
      await store().enqueue([msg("m1"), msg("m2")], T0);
      await store().claim({ signal: "sig.a", worker: "w1", max: 2, now: T0, leaseMs: 100 });
      await store().enqueue([msg("m3"), msg("m4")], T0 + 50);
      const got = await store().claim({ signal: "sig.a", worker: "w2", max: 3, now: T0 + 100, leaseMs: 100 });
      expect(got).toHaveLength(3);
      const rest = await store().claim({
        signal: "sig.a",
        worker: "w3",
        max: 3,
        now: T0 + 100,
        leaseMs: 100,
      });
      expect(sortedIds([...got, ...rest])).toEqual(["m1", "m2", "m3", "m4"]);
      for (const c of [...got, ...rest]) expect(c.attempts).toBe(c.id === "m1" || c.id === "m2" ? 2 : 1);
    });

    if (options.supportsTx !== true) {
      it("enqueue with a tx is refused with OKE1260 and stores nothing", async () => {
        await expect(store().enqueue([msg("m1")], T0, { tx: {} })).rejects.toMatchObject({
          code: "OKE1260",
          message: expect.stringMatching(/transactional emit needs the postgres driver/) as unknown,
        });
        expect(await store().getMessage("m1")).toBeUndefined();
      });
    }
  });
}
