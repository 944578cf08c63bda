/** Schedules: reconcile (new, changed, override wins, orphaned), pause/resume, and fire once per slot. */
import { describe, expect, it } from "vitest";
import { ScheduleNotOverridableError } from "../../errors.ts";
import type { DeclaredSchedule, FireRequest, ScheduleRecord, ScheduleSpec } from "../schedule-types.ts";
import type { Store } from "../types.ts";
import {
  claimOf,
  freshStore,
  idsOf,
  recordEvents,
  rejectionOf,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

const hourly: ScheduleSpec = { cron: "0 * * * *", every: null, timezone: "UTC" };
const minutely: ScheduleSpec = { cron: null, every: "1m", timezone: "UTC" };

const decl = (name: string, spec = hourly, o: Partial<DeclaredSchedule> = {}): DeclaredSchedule => ({
  name,
  spec,
  overridable: false,
  flow: `flow.${name}`,
  description: null,
  ...o,
});

const fireReq = (r: ScheduleRecord, slot: number, o: Partial<FireRequest> = {}): FireRequest => ({
  name: r.name,
  slot,
  version: r.version,
  missedRuns: 0,
  now: slot + 5,
  message: {
    id: `clock:${r.name}:${slot}`,
    signal: `clock:${r.name}`,
    key: null,
    payload: { clock: r.name, scheduledAt: slot },
    parentRunId: null,
  },
  ...o,
});

const one = async (store: Store, name: string): Promise<ScheduleRecord> => {
  const r = await store.getSchedule(name);
  expect(r, `schedule ${name}`).toBeDefined();
  return r!;
};

export function scheduleCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("schedules", () => {
    const store = freshStore(factory);

    it("reconcile creates declared schedules anchored at now; the same declaration again changes nothing", async () => {
      const out = await store().reconcileSchedules(
        [decl("b"), decl("a", minutely, { description: "A" })],
        T0,
      );
      expect(out.map((r) => r.name)).toEqual(["a", "b"]);
      expect(out[0]).toEqual({
        name: "a",
        declared: minutely,
        override: null,
        overridable: false,
        flow: "flow.a",
        description: "A",
        paused: false,
        orphaned: false,
        version: 1,
        anchorAt: T0,
        lastSlot: null,
        lastFiredAt: null,
        lastMissedRuns: 0,
        lastError: null,
        createdAt: T0,
        updatedAt: T0,
      });
      const again = await store().reconcileSchedules(
        [decl("a", minutely, { description: "A" }), decl("b")],
        T0 + 9,
      );
      expect(again).toEqual(out);
      expect(await store().getSchedule("nope")).toBeUndefined();
      expect(await store().listSchedules()).toEqual(out);
    });

    it("orphanMissing: false takes back an orphaned clock it declares and orphans nothing it leaves out", async () => {
      await store().reconcileSchedules([decl("a"), decl("b")], T0);
      // An instance without "b" boots: b is orphaned.
      await store().reconcileSchedules([decl("a")], T0 + 1);
      expect((await one(store(), "b")).orphaned).toBe(true);
      // One that declares only "b" takes it back, and leaves "a" as it is.
      const out = await store().reconcileSchedules([decl("b")], T0 + 2, { orphanMissing: false });
      expect(out.find((r) => r.name === "b")).toMatchObject({ orphaned: false, declared: hourly });
      expect(out.find((r) => r.name === "a")).toMatchObject({ orphaned: false });
      // Nothing to take back: nothing changes.
      const again = await store().reconcileSchedules([decl("b")], T0 + 3, { orphanMissing: false });
      expect(again).toEqual(out);
    });

    it("a changed declaration is stored, bumps the version and re-anchors; a removed one is orphaned, never deleted", async () => {
      await store().reconcileSchedules([decl("a"), decl("b")], T0);
      const a = await one(store(), "a");
      expect(await store().fire(fireReq(a, T0 + 3_600_000))).toBe(true);
      const out = await store().reconcileSchedules([decl("a", minutely)], T0 + 5_000_000);
      expect(out.find((r) => r.name === "a")).toMatchObject({
        declared: minutely,
        version: 2,
        anchorAt: T0 + 5_000_000,
        lastSlot: T0 + 3_600_000,
        orphaned: false,
      });
      expect(out.find((r) => r.name === "b")).toMatchObject({ orphaned: true, declared: hourly });
      // Declared again: back, with its state.
      const back = await store().reconcileSchedules([decl("a", minutely), decl("b")], T0 + 6_000_000);
      expect(back.find((r) => r.name === "b")).toMatchObject({ orphaned: false, createdAt: T0 });
      expect((await store().listFires("a")).map((f) => f.slot)).toEqual([T0 + 3_600_000]);
    });

    it("an operator override of an overridable clock wins over a later code change until reset", async () => {
      await store().reconcileSchedules([decl("a", hourly, { overridable: true })], T0);
      const edited = await store().overrideSchedule("a", minutely, T0 + 10);
      expect(edited).toMatchObject({ override: minutely, declared: hourly, version: 2, anchorAt: T0 + 10 });
      const daily: ScheduleSpec = { cron: "@daily", every: null, timezone: "Europe/Paris" };
      const out = await store().reconcileSchedules([decl("a", daily, { overridable: true })], T0 + 20);
      expect(out[0]).toMatchObject({ override: minutely, declared: daily, version: 2 });
      const reset = await store().overrideSchedule("a", null, T0 + 30);
      expect(reset).toMatchObject({ override: null, declared: daily, version: 3, anchorAt: T0 + 30 });
      expect(await store().overrideSchedule("nope", minutely, T0)).toBeUndefined();
    });

    it("a reconcile racing an operator's pause, edit or resume never undoes it, and the version never goes back", async () => {
      // A deploy changes every clock's description while an operator acts on the last one. On
      // postgres the two really run side by side, the operator starting at a different point of
      // the reconcile each round; whatever the interleaving, both changes must be in the result.
      const n = 200;
      const target = `c${n - 1}`;
      const decls = (gen: number): DeclaredSchedule[] =>
        Array.from({ length: n }, (_, i) =>
          decl(`c${String(i).padStart(3, "0")}`, minutely, { overridable: true, description: `gen ${gen}` }),
        );
      const every5m: ScheduleSpec = { cron: null, every: "5m", timezone: "UTC" };
      await store().reconcileSchedules(decls(0), T0);
      for (let gen = 1; gen <= 24; gen++) {
        const at = T0 + gen * 60_000;
        const op = (["pause", "edit", "resume"] as const)[gen % 3]!;
        if (op === "resume") await store().setSchedulePaused(target, true, at - 1);
        const before = await one(store(), target);
        const reconciled = store().reconcileSchedules(decls(gen), at);
        await new Promise((r) => setTimeout(r, (gen % 4) * 3));
        const acted =
          op === "edit"
            ? store().overrideSchedule(target, every5m, at + 1)
            : store().setSchedulePaused(target, op === "pause", at + 1);
        const [list, result] = await Promise.all([reconciled, acted]);
        const after = await one(store(), target);
        expect(after, `round ${gen} (${op})`).toMatchObject({
          paused: op === "pause",
          override: op === "edit" ? every5m : null,
          description: `gen ${gen}`,
        });
        expect(after.version, `round ${gen} (${op})`).toBe(result!.version);
        expect(after.version).toBeGreaterThan(before.version);
        expect(after.version).toBeGreaterThanOrEqual(list.find((r) => r.name === target)!.version);
        // Back to running on the declared spec for the next round, outside any race.
        await store().setSchedulePaused(target, false, at + 2);
        await store().overrideSchedule(target, null, at + 2);
      }
    });

    it("a clock declared non-overridable refuses edits, and loses an override when code revokes overridable", async () => {
      await store().reconcileSchedules([decl("fixed"), decl("soft", hourly, { overridable: true })], T0);
      const err = await rejectionOf(store().overrideSchedule("fixed", minutely, T0 + 1));
      expect(err).toBeInstanceOf(ScheduleNotOverridableError);
      expect((err as Error).message).toBe('clock "fixed" is not overridable');
      expect(await one(store(), "fixed")).toMatchObject({ override: null, version: 1 });
      await store().overrideSchedule("soft", minutely, T0 + 2);
      const out = await store().reconcileSchedules([decl("fixed"), decl("soft")], T0 + 3);
      expect(out.find((r) => r.name === "soft")).toMatchObject({
        override: null,
        overridable: false,
        version: 3,
        anchorAt: T0 + 3,
      });
    });

    it("fire records the slot and enqueues its message in one step; the same slot again is a no-op", async () => {
      await store().reconcileSchedules([decl("a")], T0);
      const a = await one(store(), "a");
      const slot = T0 + 3_600_000;
      expect(await store().fire(fireReq(a, slot, { missedRuns: 2 }))).toBe(true);
      expect(await store().fire(fireReq(a, slot))).toBe(false);
      expect(await one(store(), "a")).toMatchObject({
        lastSlot: slot,
        lastFiredAt: slot + 5,
        lastMissedRuns: 2,
      });
      expect(await store().getMessage(`clock:a:${slot}`)).toMatchObject({
        signal: "clock:a",
        status: "pending",
        payload: { clock: "a", scheduledAt: slot },
      });
      expect(idsOf(await claimOf(store(), "w", slot + 10, 10, "clock:a"))).toEqual([`clock:a:${slot}`]);
      expect(await store().listFires("a")).toEqual([
        { name: "a", slot, firedAt: slot + 5, missedRuns: 2, messageId: `clock:a:${slot}` },
      ]);
    });

    it("concurrent fires of one slot: exactly one applies", async () => {
      await store().reconcileSchedules([decl("a")], T0);
      const a = await one(store(), "a");
      const slot = T0 + 3_600_000;
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => store().fire(fireReq(a, slot, { now: slot + i }))),
      );
      expect(results.filter((x) => x)).toHaveLength(1);
      expect(idsOf(await claimOf(store(), "w", slot + 10, 10, "clock:a"))).toEqual([`clock:a:${slot}`]);
    });

    it("fireBatch fires many schedules at once, answering per request; concurrent batches fire each slot once", async () => {
      await store().reconcileSchedules([decl("a"), decl("b"), decl("c")], T0);
      const [a, b, c] = await store().listSchedules();
      const slot = T0 + 3_600_000;
      expect(await store().fire(fireReq(b!, slot))).toBe(true);
      expect(
        await store().fireBatch([fireReq(a!, slot), fireReq(b!, slot), fireReq(c!, slot, { missedRuns: 1 })]),
      ).toEqual([true, false, true]);
      expect(await store().fireBatch([])).toEqual([]);
      expect(await one(store(), "c")).toMatchObject({ lastSlot: slot, lastMissedRuns: 1 });
      const next = slot + 3_600_000;
      const batches = await Promise.all(
        [0, 1, 2, 3].map(() => store().fireBatch([a!, b!, c!].map((r) => fireReq(r, next)))),
      );
      for (let i = 0; i < 3; i++)
        expect(batches.filter((x) => x[i]).length, `schedule ${i}`).toBeLessThanOrEqual(1);
      // A batch that lost every row to a concurrent one may skip; the slots still fire exactly once.
      const retry = await store().fireBatch([a!, b!, c!].map((r) => fireReq(r, next)));
      for (let i = 0; i < 3; i++) expect(batches.filter((x) => x[i]).length + (retry[i] ? 1 : 0)).toBe(1);
      for (const name of ["a", "b", "c"])
        expect(idsOf(await claimOf(store(), "w", next + 10, 10, `clock:${name}`))).toEqual([
          `clock:${name}:${slot}`,
          `clock:${name}:${next}`,
        ]);
    });

    it("fireBatch with a claim writes the fire already claimed (claim at fire) and announces only the others", async () => {
      await store().reconcileSchedules([decl("a"), decl("b")], T0);
      const [a, b] = await store().listSchedules();
      const slot = T0 + 3_600_000;
      const events = recordEvents(store());
      const claimed = { worker: "w1", leaseExpiresAt: slot + 30_000 };
      expect(await store().fireBatch([fireReq(a!, slot, { claim: claimed }), fireReq(b!, slot)])).toEqual([
        true,
        true,
      ]);
      await events.next((e) => e.kind === "enqueued" && e.signal === "clock:b");
      events.stop();
      if (options.claimAtEmit === true) {
        expect(await store().getMessage(`clock:a:${slot}`)).toMatchObject({
          status: "inflight",
          lockedBy: "w1",
          attempts: 1,
          leaseExpiresAt: slot + 30_000,
        });
        expect(events.events.filter((e) => e.kind === "enqueued" && e.signal === "clock:a")).toEqual([]);
      } else {
        // Drivers without claim at emit store it pending, like any fire.
        expect(await store().getMessage(`clock:a:${slot}`)).toMatchObject({ status: "pending", attempts: 0 });
      }
      expect(await store().getMessage(`clock:b:${slot}`)).toMatchObject({ status: "pending" });
    });

    it("fire refuses an older slot, a stale version, a slot at or before the anchor, a paused or orphaned schedule", async () => {
      await store().reconcileSchedules([decl("a"), decl("b")], T0);
      let a = await one(store(), "a");
      expect(await store().fire(fireReq(a, T0))).toBe(false); // at the anchor
      expect(await store().fire(fireReq(a, T0 + 7_200_000))).toBe(true);
      expect(await store().fire(fireReq(a, T0 + 3_600_000))).toBe(false); // older than the last
      expect(await store().fire(fireReq(a, T0 + 10_800_000, { version: a.version + 1 }))).toBe(false);
      a = (await store().setSchedulePaused("a", true, T0 + 8_000_000))!;
      expect(await store().fire(fireReq(a, T0 + 10_800_000))).toBe(false);
      await store().reconcileSchedules([decl("a")], T0 + 8_000_001);
      const b = await one(store(), "b");
      expect(b.orphaned).toBe(true);
      expect(await store().fire(fireReq(b, T0 + 10_800_000))).toBe(false);
      expect(await store().fire(fireReq({ ...b, name: "nope" }, T0 + 10_800_000))).toBe(false);
      expect(await claimOf(store(), "w", T0 + 20_000_000, 10, "clock:b")).toEqual([]);
    });

    it("pause is stored and idempotent; resume re-anchors so paused slots are skipped, not caught up", async () => {
      await store().reconcileSchedules([decl("a")], T0);
      const p = await store().setSchedulePaused("a", true, T0 + 100);
      expect(p).toMatchObject({ paused: true, version: 2, anchorAt: T0 });
      expect(await store().setSchedulePaused("a", true, T0 + 200)).toMatchObject({
        paused: true,
        version: 2,
      });
      // A restart's reconcile leaves the pause alone.
      await store().reconcileSchedules([decl("a")], T0 + 300);
      expect(await one(store(), "a")).toMatchObject({ paused: true });
      const r = await store().setSchedulePaused("a", false, T0 + 9_000_000);
      expect(r).toMatchObject({ paused: false, version: 3, anchorAt: T0 + 9_000_000 });
      expect(await store().fire(fireReq(r!, T0 + 7_200_000))).toBe(false);
      expect(await store().setSchedulePaused("nope", true, T0)).toBeUndefined();
    });

    it("records a fire's last error and clears it; fire history is newest first and pruning keeps the latest", async () => {
      await store().reconcileSchedules([decl("a")], T0);
      const a = await one(store(), "a");
      const err = { slot: T0 + 3_600_000, code: "Boom", message: "it broke", at: T0 + 3_600_010 };
      await store().recordScheduleError("a", err, T0 + 3_600_010);
      await store().recordScheduleError("nope", err, T0);
      expect((await one(store(), "a")).lastError).toEqual(err);
      await store().recordScheduleError("a", null, T0 + 3_600_020);
      expect((await one(store(), "a")).lastError).toBeNull();
      for (const h of [1, 2, 3]) expect(await store().fire(fireReq(a, T0 + h * 3_600_000))).toBe(true);
      expect((await store().listFires("a", 2)).map((f) => f.slot)).toEqual([T0 + 10_800_000, T0 + 7_200_000]);
      expect(await store().pruneFires(T0 + 100 * 3_600_000)).toBe(2);
      expect((await store().listFires("a")).map((f) => f.slot)).toEqual([T0 + 10_800_000]);
      // The pruned slots stay fired: the last slot fences them.
      expect(await store().fire(fireReq(a, T0 + 3_600_000))).toBe(false);
    });
  });
}
