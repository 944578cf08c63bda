/** Conformance cases of the flows filter: claims, orphan scans and wake times see only runs of the caller's flows. */
import { describe, expect, it } from "vitest";
import { freshStore, LEASE, sleepingRun, sortedIds, startRun, T0, type StoreFactory } from "./harness.ts";

/** claimDueRuns, listOrphans and nextWakeAt with `flows`: other flows' runs are never taken nor moved. */
export function flowFilterCases(factory: StoreFactory): void {
  describe("journal: the flows filter", () => {
    const store = freshStore(factory);

    /** x1 (flow.x, due at +100), y1 (flow.y, due at +200), a running flow.x run whose lease lapses at +LEASE. */
    async function mixed(): Promise<void> {
      await sleepingRun(store(), "x1", T0 + 100, { flow: "flow.x" });
      await sleepingRun(store(), "y1", T0 + 200, { flow: "flow.y" });
      await startRun(store(), "x-orphan", { flow: "flow.x", owner: "dead" });
    }

    it("claimDueRuns with flows takes only due runs of those flows; the others keep status and wakeAt", async () => {
      await mixed();
      const now = T0 + LEASE;
      const got = await store().claimDueRuns({ owner: "b", now, max: 10, leaseMs: LEASE, flows: ["flow.y"] });
      expect(got.map((a) => [a.run.id, a.run.flow, a.run.status, a.run.leaseOwner])).toEqual([
        ["y1", "flow.y", "running", "b"],
      ]);
      expect(await store().getRun("x1")).toMatchObject({
        status: "sleeping",
        wakeAt: T0 + 100,
        leaseOwner: null,
      });
      expect(await store().getRun("x-orphan")).toMatchObject({ status: "running", leaseOwner: "dead" });
      const x = await store().claimDueRuns({ owner: "c", now, max: 10, leaseMs: LEASE, flows: ["flow.x"] });
      expect(x.map((a) => a.run.id)).toEqual(["x1", "x-orphan"]);
    });

    it("claimDueRuns with flows: [] takes nothing; without flows takes every flow", async () => {
      await mixed();
      const now = T0 + LEASE;
      expect(await store().claimDueRuns({ owner: "a", now, max: 10, leaseMs: LEASE, flows: [] })).toEqual([]);
      expect(
        await store().claimDueRuns({ owner: "a", now, max: 10, leaseMs: LEASE, flows: ["flow.none"] }),
      ).toEqual([]);
      expect(await store().getRun("x1")).toMatchObject({ status: "sleeping", wakeAt: T0 + 100 });
      const all = await store().claimDueRuns({ owner: "a", now, max: 10, leaseMs: LEASE });
      expect(all.map((a) => a.run.id)).toEqual(["x1", "y1", "x-orphan"]);
    });

    it("claimDueRuns with flows keeps deadline order across flows and honours max", async () => {
      await sleepingRun(store(), "a1", T0 + 300, { flow: "flow.a" });
      await sleepingRun(store(), "b1", T0 + 100, { flow: "flow.b" });
      await sleepingRun(store(), "a2", T0 + 200, { flow: "flow.a" });
      await sleepingRun(store(), "c1", T0 + 50, { flow: "flow.c" });
      const req = { owner: "i", now: T0 + 1_000, leaseMs: LEASE, flows: ["flow.a", "flow.b"] };
      expect((await store().claimDueRuns({ ...req, max: 2 })).map((a) => a.run.id)).toEqual(["b1", "a2"]);
      expect((await store().claimDueRuns({ ...req, max: 2 })).map((a) => a.run.id)).toEqual(["a1"]);
      expect(await store().getRun("c1")).toMatchObject({ status: "sleeping", wakeAt: T0 + 50 });
    });

    it("nextWakeAt with flows is the earliest deadline among runs of those flows", async () => {
      await mixed();
      expect(await store().nextWakeAt()).toBe(T0 + 100);
      expect(await store().nextWakeAt({ flows: ["flow.y"] })).toBe(T0 + 200);
      expect(await store().nextWakeAt({ flows: ["flow.x"] })).toBe(T0 + 100);
      expect(await store().nextWakeAt({ flows: ["flow.y", "flow.x"] })).toBe(T0 + 100);
      expect(await store().nextWakeAt({ flows: [] })).toBeNull();
      expect(await store().nextWakeAt({ flows: ["flow.none"] })).toBeNull();
      await store().claimDueRuns({ owner: "c", now: T0 + 100, max: 10, leaseMs: LEASE, flows: ["flow.x"] });
      // x1 is running now (lease to +100+LEASE); the lapsed orphan's lease is the earliest flow.x deadline.
      expect(await store().nextWakeAt({ flows: ["flow.x"] })).toBe(T0 + LEASE);
    });

    it("listOrphans with flows lists only runs of those flows, running first", async () => {
      await mixed();
      const now = T0 + LEASE;
      expect(sortedIds(await store().listOrphans(now))).toEqual(["x-orphan", "x1", "y1"]);
      expect((await store().listOrphans(now, undefined, { flows: ["flow.x"] })).map((r) => r.id)).toEqual([
        "x-orphan",
        "x1",
      ]);
      expect((await store().listOrphans(now, 1, { flows: ["flow.x"] })).map((r) => r.id)).toEqual([
        "x-orphan",
      ]);
      expect((await store().listOrphans(now, 10, { flows: ["flow.y"] })).map((r) => r.id)).toEqual(["y1"]);
      expect(await store().listOrphans(now, 10, { flows: [] })).toEqual([]);
    });
  });
}
