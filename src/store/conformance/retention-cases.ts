/** Conformance cases of run retention: pruneRuns deletes finished runs and their journals in batches. */
import { describe, expect, it } from "vitest";
import { freshStore, sleepingRun, startRun, step, T0, type StoreFactory } from "./harness.ts";
import type { Store } from "../types.ts";

/** A run that journaled one step and finished at `at`. */
async function finishedRun(
  store: Store,
  id: string,
  status: "completed" | "failed",
  at: number,
): Promise<void> {
  await startRun(store, id, { now: at - 1 });
  await store.append({ runId: id, owner: "inst-1", now: at - 1, entries: [step(id, 0)] });
  await store.finish({
    runId: id,
    owner: "inst-1",
    now: at,
    status,
    ...(status === "failed" ? { error: { code: "E", message: "boom" } } : { output: 1 }),
  });
}

/** Retention: finished runs and their journals are deleted in bounded batches; live runs never are. */
export function retentionCases(factory: StoreFactory): void {
  describe("journal: retention of finished runs", () => {
    const store = freshStore(factory);

    it("pruneRuns deletes completed and failed runs last updated before the cut-off, with their journals", async () => {
      await finishedRun(store(), "old-ok", "completed", T0 + 10);
      await finishedRun(store(), "old-bad", "failed", T0 + 20);
      await finishedRun(store(), "recent", "completed", T0 + 100);
      await startRun(store(), "live", { now: T0 });
      await sleepingRun(store(), "sleeper", T0 + 5, { now: T0 });
      expect(await store().pruneRuns(T0 + 50, 100)).toBe(2);
      expect(await store().getRun("old-ok")).toBeUndefined();
      expect(await store().getRun("old-bad")).toBeUndefined();
      expect(await store().getJournal("old-ok")).toEqual([]);
      expect(await store().getRun("recent")).toMatchObject({ status: "completed" });
      expect(await store().getJournal("recent")).toHaveLength(1);
      expect(await store().getRun("live")).toMatchObject({ status: "running" });
      expect(await store().getRun("sleeper")).toMatchObject({ status: "sleeping" });
      // Strictly before: a run updated at the cut-off stays.
      expect(await store().pruneRuns(T0 + 100, 100)).toBe(0);
      expect(await store().pruneRuns(T0 + 101, 100)).toBe(1);
      expect((await store().listRuns({})).map((r) => r.id).sort()).toEqual(["live", "sleeper"]);
    });

    it("pruneRuns removes at most `limit` runs per call; repeated calls finish the work", async () => {
      for (let i = 0; i < 7; i++) await finishedRun(store(), `r${i}`, "completed", T0 + i);
      expect(await store().pruneRuns(T0 + 1_000, 3)).toBe(3);
      expect(await store().pruneRuns(T0 + 1_000, 3)).toBe(3);
      expect(await store().pruneRuns(T0 + 1_000, 3)).toBe(1);
      expect(await store().pruneRuns(T0 + 1_000, 3)).toBe(0);
      expect(await store().listRuns({ status: "completed" })).toEqual([]);
    });

    it("a pruned run id can be started again as a new run", async () => {
      await finishedRun(store(), "again", "completed", T0);
      expect(await store().pruneRuns(T0 + 1, 10)).toBe(1);
      const acquired = await startRun(store(), "again", { now: T0 + 2 });
      expect(acquired.created).toBe(true);
      expect(acquired.entries).toEqual([]);
    });
  });
}
