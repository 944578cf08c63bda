/** Console listings, heartbeats and the audit log: the same answers on every driver. */
import { describe, expect, it } from "vitest";
import type { Page } from "../console-types.ts";
import type { Store } from "../types.ts";
import {
  claimOf,
  freshStore,
  idsOf,
  ids,
  msg,
  sortedIds,
  outcome,
  sleepEntry,
  sleepingRun,
  startRun,
  T0,
  type StoreFactory,
} from "./harness.ts";

/** Follows `next` to the end, collecting ids. */
async function allPages<T extends { id: string | number }>(
  fetch: (cursor: string | null) => Promise<Page<T>>,
): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | null = null;
  for (let guard = 0; guard < 100; guard++) {
    const page: Page<T> = await fetch(cursor);
    for (const x of page.items) out.push(String(x.id));
    if (page.next === null) return out;
    cursor = page.next;
  }
  throw new Error("paging did not end");
}

/** Claims every claimable message of sig.a at `now` and settles the listed ones dead, the rest delivered. */
async function settleAll(store: Store, now: number, dead: readonly string[]): Promise<void> {
  const got = await store.claim({ signal: "sig.a", worker: "w", max: 1_000, now, leaseMs: 1_000 });
  await store.settle(
    got.map((c) =>
      dead.includes(c.id)
        ? outcome(c, "dead", { code: "E_BOOM", message: `${c.id} failed`, at: now })
        : outcome(c, "delivered"),
    ),
    now,
  );
}

export function consoleCases(factory: StoreFactory): void {
  describe("console listings, heartbeats, audit", () => {
    const store = freshStore(factory);

    it("pages pending messages of one signal in emit order, keyed and unkeyed merged", async () => {
      const names = ids("p", 7);
      for (const [i, id] of names.entries())
        await store().enqueue([msg(id, { key: i % 2 === 0 ? null : `k${i}` })], T0 + i);
      await store().enqueue([msg("other", { signal: "sig.b" })], T0);
      const first = await store().pageMessages({ signal: "sig.a", status: "pending", limit: 3 });
      expect(idsOf(first.items)).toEqual(names.slice(0, 3));
      expect(first.next).not.toBeNull();
      expect(
        await allPages((cursor) =>
          store().pageMessages({ signal: "sig.a", status: "pending", limit: 3, cursor }),
        ),
      ).toEqual(names);
      expect((await store().pageMessages({ signal: "sig.b", status: "dead", limit: 3 })).items).toEqual([]);
    });

    it("pages dead letters oldest first with their failures, delivered newest first", async () => {
      const names = ids("m", 6);
      for (const [i, id] of names.entries()) await store().enqueue([msg(id)], T0 + i);
      await settleAll(store(), T0 + 100, [names[1]!, names[3]!, names[4]!]);
      const dead = await store().pageMessages({ signal: "sig.a", status: "dead", limit: 2 });
      expect(idsOf(dead.items)).toEqual([names[1], names[3]]);
      expect(dead.items[0]!.failures).toEqual([
        { code: "E_BOOM", message: `${names[1]} failed`, at: T0 + 100, attempt: 1 },
      ]);
      expect(
        await allPages((cursor) =>
          store().pageMessages({ signal: "sig.a", status: "dead", limit: 2, cursor }),
        ),
      ).toEqual([names[1], names[3], names[4]]);
      // Delivered later ones first; same update time breaks by emit order, newest first.
      expect(
        await allPages((cursor) =>
          store().pageMessages({ signal: "sig.a", status: "delivered", limit: 2, cursor }),
        ),
      ).toEqual([names[5], names[2], names[0]]);
    });

    it("pages dead letters newest first on request, the reverse of the default order", async () => {
      const names = ids("m", 6);
      for (const [i, id] of names.entries()) await store().enqueue([msg(id)], T0 + (i < 3 ? 0 : i));
      await settleAll(store(), T0 + 100, [names[0]!, names[1]!, names[3]!, names[5]!]);
      const first = await store().pageMessages({
        signal: "sig.a",
        status: "dead",
        limit: 1,
        newestFirst: true,
      });
      expect(idsOf(first.items)).toEqual([names[5]]);
      // Same creation time: emit order breaks the tie, newest first.
      expect(
        await allPages((cursor) =>
          store().pageMessages({ signal: "sig.a", status: "dead", limit: 1, cursor, newestFirst: true }),
        ),
      ).toEqual([names[5], names[3], names[1], names[0]]);
      expect(
        await allPages((cursor) =>
          store().pageMessages({ signal: "sig.a", status: "dead", limit: 3, cursor, newestFirst: true }),
        ),
      ).toEqual([names[5], names[3], names[1], names[0]]);
      expect(
        (await store().pageMessages({ signal: "sig.b", status: "dead", limit: 3, newestFirst: true })).items,
      ).toEqual([]);
    });

    it("finds sleeping runs by the label of their current sleep, newest first, across pages", async () => {
      const sleepOn = (id: string, seq: number, label: string, now: number) =>
        store().park({
          runId: id,
          owner: "inst-1",
          now,
          entry: { ...sleepEntry(id, seq, now + 1_000, now), label },
        });
      // Runs asleep on other labels or not asleep at all, between the matches and around them.
      for (let i = 0; i < 6; i++) await startRun(store(), `busy${i}`, { now: T0 + i * 10 + 5 });
      await startRun(store(), "pay1", { now: T0 + 10 });
      await sleepOn("pay1", 0, "payment", T0 + 10);
      await startRun(store(), "other", { now: T0 + 20 });
      await sleepOn("other", 0, "shipping", T0 + 20);
      await startRun(store(), "pay2", { now: T0 + 30, flow: "flow.b" });
      await sleepOn("pay2", 0, "payment", T0 + 30);
      // Slept on "payment" before; sleeps on "reminder" now.
      await startRun(store(), "moved", { now: T0 + 40 });
      await sleepOn("moved", 0, "payment", T0 + 40);
      expect(
        await store().claimDueRuns({
          owner: "inst-1",
          now: T0 + 1_040,
          max: 1,
          leaseMs: 1_000,
          runIds: ["moved"],
        }),
      ).toHaveLength(1);
      await sleepOn("moved", 1, "reminder", T0 + 1_040);
      // Slept on "payment", woke, runs now.
      await startRun(store(), "awake", { now: T0 + 50 });
      await sleepOn("awake", 0, "payment", T0 + 50);
      expect(
        await store().claimDueRuns({
          owner: "inst-1",
          now: T0 + 1_050,
          max: 1,
          leaseMs: 1_000,
          runIds: ["awake"],
        }),
      ).toHaveLength(1);
      await startRun(store(), "pay3", { now: T0 + 60 });
      await sleepOn("pay3", 0, "payment", T0 + 60);

      const labelled = (f: Omit<Parameters<Store["pageRuns"]>[0], "limit" | "cursor">, limit: number) =>
        allPages((cursor) => store().pageRuns({ ...f, limit, cursor }));
      const first = await store().pageRuns({ sleepLabel: "payment", limit: 1 });
      expect(idsOf(first.items)).toEqual(["pay3"]);
      expect(first.next).not.toBeNull();
      expect(await labelled({ sleepLabel: "payment" }, 1)).toEqual(["pay3", "pay2", "pay1"]);
      expect(await labelled({ sleepLabel: "payment" }, 2)).toEqual(["pay3", "pay2", "pay1"]);
      expect((await store().pageRuns({ sleepLabel: "payment", limit: 3 })).next).toBeNull();
      expect(await labelled({ sleepLabel: "reminder" }, 2)).toEqual(["moved"]);
      expect(await labelled({ sleepLabel: "payment", flow: "flow.a" }, 2)).toEqual(["pay3", "pay1"]);
      expect(await labelled({ sleepLabel: "payment", status: "sleeping" }, 2)).toEqual([
        "pay3",
        "pay2",
        "pay1",
      ]);
      expect(await labelled({ sleepLabel: "payment", status: "running" }, 2)).toEqual([]);
      expect(await labelled({ sleepLabel: "nobody" }, 2)).toEqual([]);
    });

    it("pages runs newest first, filtered by status, flow, parent and time", async () => {
      for (let i = 0; i < 5; i++)
        await startRun(store(), `r${i}`, { now: T0 + i * 10, flow: i % 2 === 0 ? "flow.a" : "flow.b" });
      await startRun(store(), "c1", { now: T0 + 100, flow: "flow.c", parentRunId: "r0" });
      await startRun(store(), "c2", { now: T0 + 100, flow: "flow.c", parentRunId: "r0" });
      await sleepingRun(store(), "s1", T0 + 5_000, { now: T0 + 200, flow: "flow.a" });
      const all = (f: Omit<Parameters<Store["pageRuns"]>[0], "limit" | "cursor">) =>
        allPages((cursor) => store().pageRuns({ ...f, limit: 2, cursor }));
      expect(await all({})).toEqual(["s1", "c2", "c1", "r4", "r3", "r2", "r1", "r0"]);
      expect(await all({ flow: "flow.a" })).toEqual(["s1", "r4", "r2", "r0"]);
      expect(await all({ status: "sleeping" })).toEqual(["s1"]);
      expect(await all({ status: "running", flow: "flow.b" })).toEqual(["r3", "r1"]);
      expect(await all({ parentRunId: "r0" })).toEqual(["c2", "c1"]);
      expect(await all({ since: T0 + 10, until: T0 + 40 })).toEqual(["r3", "r2", "r1"]);
      expect((await store().pageRuns({ limit: 10 })).next).toBeNull();
      const counts = await store().runCounts();
      expect(counts).toEqual(
        expect.arrayContaining([
          { flow: "flow.a", status: "running", count: 3 },
          { flow: "flow.a", status: "sleeping", count: 1 },
          { flow: "flow.b", status: "running", count: 2 },
          { flow: "flow.c", status: "running", count: 2 },
        ]),
      );
      expect(counts).toHaveLength(4);
    });

    it("counts deliveries per signal per bucket", async () => {
      await store().enqueue([msg("a1"), msg("a2"), msg("a3"), msg("b1", { signal: "sig.b" })], T0);
      await settleAll(store(), T0 + 1_000, []);
      const more = await store().claim({ signal: "sig.a", worker: "w", max: 10, now: T0, leaseMs: 1 });
      expect(more).toEqual([]);
      const tp = await store().throughput(T0, 60_000, T0 + 180_000);
      expect(tp).toEqual([{ signal: "sig.a", from: T0, bucketMs: 60_000, delivered: [3, 0, 0] }]);
      expect(await store().throughput(T0 + 60_000, 60_000, T0 + 120_000)).toEqual([]);
    });

    it("lists every queue with a backlog: pending and inflight counts, oldest pending, earliest lease", async () => {
      expect(await store().queueBacklog()).toEqual([]);
      await store().enqueue([msg("a1")], T0);
      await store().enqueue([msg("a2", { key: "k1" })], T0 + 1);
      await store().enqueue([msg("a3"), msg("a4", { key: "k2" })], T0 + 2);
      await store().enqueue([msg("b1", { signal: "sig.b" })], T0 + 10);
      await store().enqueue([msg("c1", { signal: "sig.c" }), msg("c2", { signal: "sig.c" })], T0);
      // sig.a: its oldest held (a1), three pending. sig.b: its only message held. sig.c: all settled.
      expect(idsOf(await claimOf(store(), "w", T0 + 100, 1, "sig.a", 1_000))).toEqual(["a1"]);
      expect(idsOf(await claimOf(store(), "w", T0 + 200, 1, "sig.b", 500))).toEqual(["b1"]);
      const c = await claimOf(store(), "w", T0 + 300, 10, "sig.c");
      await store().settle(
        c.map((x) =>
          x.id === "c1"
            ? outcome(x, "delivered")
            : outcome(x, "dead", { code: "E_BOOM", message: "c2 failed", at: T0 + 300 }),
        ),
        T0 + 300,
      );
      // A broadcast copy's queue is a queue like any other, listed under its own name.
      await store().enqueue([msg("x1", { signal: "~broadcast:sig.x:flow.y" })], T0 + 20);
      expect(await store().queueBacklog()).toEqual([
        {
          signal: "sig.a",
          pending: 3,
          inflight: 1,
          oldestPendingCreatedAt: T0 + 1,
          earliestLeaseExpiry: T0 + 1_100,
        },
        {
          signal: "sig.b",
          pending: 0,
          inflight: 1,
          oldestPendingCreatedAt: null,
          earliestLeaseExpiry: T0 + 700,
        },
        {
          signal: "~broadcast:sig.x:flow.y",
          pending: 1,
          inflight: 0,
          oldestPendingCreatedAt: T0 + 20,
          earliestLeaseExpiry: null,
        },
      ]);
      // Delivered and dead are not backlog: once sig.a and sig.b are delivered (their leases lapsed
      // and were taken again), only the copy's queue is left.
      const rest = [
        ...(await claimOf(store(), "w2", T0 + 2_000, 10, "sig.a")),
        ...(await claimOf(store(), "w2", T0 + 2_000, 10, "sig.b")),
      ];
      expect(sortedIds(rest)).toEqual(["a1", "a2", "a3", "a4", "b1"]);
      await store().settle(
        rest.map((x) => outcome(x, "delivered")),
        T0 + 2_000,
      );
      expect((await store().queueBacklog()).map((b) => b.signal)).toEqual(["~broadcast:sig.x:flow.y"]);
    });

    it("keeps one heartbeat per instance; old ones and removed ones are not listed", async () => {
      const info = (id: string, startedAt: number) => ({
        id,
        version: "1.0.0",
        okengineVersion: "0.1.0",
        host: "h",
        pid: 1,
        env: "prod",
        startedAt,
        flows: ["flow.a"],
        signals: ["sig.a"],
        console: null,
      });
      await store().heartbeat(info("i2", T0 + 5), T0 + 10);
      await store().heartbeat(info("i1", T0), T0 + 10);
      await store().heartbeat(info("i1", T0), T0 + 20);
      await store().heartbeat(info("i3", T0), T0 - 100_000);
      expect(await store().listInstances(T0)).toEqual([
        { ...info("i1", T0), seenAt: T0 + 20 },
        { ...info("i2", T0 + 5), seenAt: T0 + 10 },
      ]);
      await store().removeInstance("i1");
      await store().removeInstance("nobody");
      expect(idsOf(await store().listInstances(T0))).toEqual(["i2"]);
    });

    it("appends audit entries with increasing ids, paged newest first", async () => {
      const recs = [];
      for (let i = 0; i < 5; i++)
        recs.push(
          await store().recordAudit({
            at: T0 + i,
            actor: "alice",
            action: "replay",
            target: "signal:sig.a",
            detail: { ids: [`m${i}`], dryRun: false },
          }),
        );
      for (let i = 1; i < recs.length; i++) expect(recs[i]!.id).toBeGreaterThan(recs[i - 1]!.id);
      const first = await store().pageAudit({ limit: 2 });
      expect(first.items[0]).toEqual({ ...recs[4], detail: { ids: ["m4"], dryRun: false } });
      expect(await allPages((cursor) => store().pageAudit({ limit: 2, cursor }))).toEqual(
        recs.map((r) => String(r.id)).reverse(),
      );
    });
  });
}
