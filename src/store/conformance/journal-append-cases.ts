/** Conformance cases of journal appends: fencing, ordering, duplicates, the outbox. */
import { describe, expect, it } from "vitest";
import { entryName, type JournalEntry } from "../types.ts";
import {
  claimOf,
  expectBusy,
  freshStore,
  LEASE,
  msg,
  rejectionOf,
  startRun,
  step,
  T0,
  type ConformanceOptions,
  type StoreFactory,
} from "./harness.ts";

/** Appending journal entries: fencing, ordering, duplicates, and the outbox (entries + emits in one commit). */
export function journalAppendCases(factory: StoreFactory, options: ConformanceOptions = {}): void {
  describe("journal: append and the outbox", () => {
    const store = freshStore(factory);

    describe("getJournalEnds (optional: a long journal's ends without its middle)", () => {
      if (options.journalEnds !== true) {
        it("is absent", () => {
          expect(Reflect.get(store(), "getJournalEnds")).toBeUndefined();
        });
        return;
      }
      const ends = (runId: string, head: number, tail: number) => {
        const s = store();
        if (s.getJournalEnds === undefined) throw new Error("the driver has no getJournalEnds");
        return s.getJournalEnds(runId, head, tail);
      };
      const seqs = (list: JournalEntry[]) => list.map((e) => e.seq);
      /** A run whose journal holds steps 0..n-1 ("s0", "s1", …), appended in two writes. */
      const runOf = async (runId: string, n: number) => {
        await startRun(store(), runId);
        const all = Array.from({ length: n }, (_, i) => step(runId, i, `s${i}`, { i }));
        const half = Math.floor(n / 2);
        await store().append({ runId, owner: "inst-1", now: T0 + 1, entries: all.slice(0, half) });
        await store().append({ runId, owner: "inst-1", now: T0 + 2, entries: all.slice(half) });
      };

      it("a long journal: the first head and last tail entries in seq order, whole, and the count", async () => {
        await runOf("r1", 12);
        const got = await ends("r1", 3, 4);
        expect(seqs(got.head)).toEqual([0, 1, 2]);
        expect(seqs(got.tail)).toEqual([8, 9, 10, 11]);
        expect(got.count).toBe(12);
        const whole = await store().getJournal("r1");
        expect(got.head).toEqual(whole.slice(0, 3));
        expect(got.tail).toEqual(whole.slice(8));
      });

      it("a journal of head + tail entries or fewer is all in head; the lists never overlap", async () => {
        await runOf("r1", 7);
        expect(seqs((await ends("r1", 3, 4)).head)).toEqual([0, 1, 2, 3, 4, 5, 6]);
        expect((await ends("r1", 3, 4)).tail).toEqual([]);
        const one = await ends("r1", 3, 3);
        expect([seqs(one.head), seqs(one.tail), one.count]).toEqual([[0, 1, 2], [4, 5, 6], 7]);
        // Only the last entry (a sleeper's label), only the first.
        const last = await ends("r1", 0, 1);
        expect([seqs(last.head), seqs(last.tail)]).toEqual([[], [6]]);
        const first = await ends("r1", 1, 0);
        expect([seqs(first.head), seqs(first.tail)]).toEqual([[0], []]);
      });

      it("an unknown run, or one with no entries yet, is empty; bad counts read as 0", async () => {
        expect(await ends("nope", 3, 3)).toEqual({ head: [], tail: [], count: 0 });
        await startRun(store(), "r0");
        expect(await ends("r0", 3, 3)).toEqual({ head: [], tail: [], count: 0 });
        await runOf("r1", 5);
        const none = await ends("r1", -2, Number.NaN);
        expect([seqs(none.head), seqs(none.tail), none.count]).toEqual([[], [], 5]);
        const fractions = await ends("r1", 1.7, 1.2);
        expect([seqs(fractions.head), seqs(fractions.tail)]).toEqual([[0], [4]]);
      });
    });

    it("appended entries come back ordered by seq, with every field", async () => {
      await startRun(store(), "r1");
      const entries: JournalEntry[] = [
        { runId: "r1", seq: 2, kind: "id", name: "order-id", value: "ord_1", at: T0 + 2 },
        { runId: "r1", seq: 0, kind: "step", name: "charge", value: { ok: true, cents: [1, 2] }, at: T0 },
        {
          runId: "r1",
          seq: 1,
          kind: "step",
          name: "ship",
          error: { code: "E1", message: "no stock" },
          at: T0 + 1,
        },
      ];
      await store().append({ runId: "r1", owner: "inst-1", now: T0 + 3, entries });
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 4,
        entries: [
          {
            runId: "r1",
            seq: 3,
            kind: "sleep",
            label: "wait",
            duration: "2m",
            wakeAt: T0 + 120_000,
            at: T0 + 4,
          },
        ],
      });
      const journal = await store().getJournal("r1");
      expect(journal.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
      expect(journal[0]).toEqual(entries[1]);
      expect(journal[1]).toEqual(entries[2]);
      expect(journal[2]).toEqual(entries[0]);
      expect(journal[3]).toEqual({
        runId: "r1",
        seq: 3,
        kind: "sleep",
        label: "wait",
        duration: "2m",
        wakeAt: T0 + 120_000,
        at: T0 + 4,
      });
      expect((await store().getRun("r1"))!.updatedAt).toBe(T0 + 4);
    });

    it("stored entries are copies: mutating what was appended or read changes nothing", async () => {
      await startRun(store(), "r1");
      const value = { items: [1] };
      await store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 0, "s", value)] });
      value.items.push(2);
      const [read] = await store().getJournal("r1");
      (read!.value as { items: number[] }).items.push(3);
      expect((await store().getJournal("r1"))[0]!.value).toEqual({ items: [1] });
    });

    it("append by a non-holder is refused with JournalLeaseBusy and writes nothing", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await expectBusy(
        store().append({
          runId: "r1",
          owner: "inst-2",
          now: T0,
          entries: [step("r1", 0)],
          emits: [msg("m1")],
        }),
        "r1",
      );
      expect(await store().getJournal("r1")).toEqual([]);
      expect(await store().getMessage("m1")).toBeUndefined();
    });

    it("after a takeover the previous holder's append is fenced off", async () => {
      await startRun(store(), "r1", { owner: "inst-1" });
      await startRun(store(), "r1", { owner: "inst-2", now: T0 + LEASE });
      await expectBusy(
        store().append({ runId: "r1", owner: "inst-1", now: T0 + LEASE, entries: [step("r1", 0)] }),
        "r1",
      );
      await store().append({
        runId: "r1",
        owner: "inst-2",
        now: T0 + LEASE,
        entries: [step("r1", 0, "mine")],
      });
      expect((await store().getJournal("r1")).map(entryName)).toEqual(["mine"]);
    });

    it("a holder whose lease expired but was not taken over may still append", async () => {
      await startRun(store(), "r1", { owner: "inst-1", leaseMs: 100 });
      await store().append({ runId: "r1", owner: "inst-1", now: T0 + 5_000, entries: [step("r1", 0)] });
      expect(await store().getJournal("r1")).toHaveLength(1);
    });

    it("append after finish is refused and writes nothing", async () => {
      await startRun(store(), "r1");
      await store().finish({ runId: "r1", owner: "inst-1", now: T0, status: "completed" });
      await rejectionOf(store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 0)] }));
      expect(await store().getJournal("r1")).toEqual([]);
    });

    it("append of an unknown run is refused", async () => {
      await rejectionOf(
        store().append({ runId: "ghost", owner: "inst-1", now: T0, entries: [step("ghost", 0)] }),
      );
      expect(await store().getRun("ghost")).toBeUndefined();
    });

    it("a duplicate seq is refused and nothing of that append is written", async () => {
      await startRun(store(), "r1");
      await store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 0, "first")] });
      const err = await rejectionOf(
        store().append({
          runId: "r1",
          owner: "inst-1",
          now: T0,
          entries: [step("r1", 1), step("r1", 0, "again")],
          emits: [msg("m1")],
        }),
      );
      expect(err).toMatchObject({ code: "OKE1312" });
      await rejectionOf(
        store().append({ runId: "r1", owner: "inst-1", now: T0, entries: [step("r1", 5), step("r1", 5)] }),
      );
      expect((await store().getJournal("r1")).map((e) => [e.seq, entryName(e)])).toEqual([[0, "first"]]);
      expect(await store().getMessage("m1")).toBeUndefined();
    });

    it("an append repeated after its reply was lost (same seqs, kinds and names, from the holder) resolves and writes nothing more", async () => {
      await startRun(store(), "r1");
      const req = {
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [
          step("r1", 0, "charge"),
          { runId: "r1", seq: 1, kind: "emit" as const, name: "sig.a", at: T0 },
        ],
        emits: [msg("m1")],
      };
      await store().append(req);
      await store().append(req);
      expect((await store().getJournal("r1")).map((e) => [e.seq, entryName(e)])).toEqual([
        [0, "charge"],
        [1, "sig.a"],
      ]);
      expect(await claimOf(store(), "w", T0, 10)).toMatchObject([{ id: "m1" }]);
      expect(await claimOf(store(), "w2", T0, 10)).toEqual([]);
      // Not the holder, or another name at that seq: refused as before.
      await expectBusy(store().append({ ...req, owner: "inst-2" }), "r1");
      expect(
        await rejectionOf(store().append({ ...req, entries: [step("r1", 0, "refund")], emits: [] })),
      ).toMatchObject({
        code: "OKE1312",
      });
    });

    it("an append repeated with the same content in another key order, or at another time, is still a retry", async () => {
      await startRun(store(), "r1");
      const value = { a: 1, nested: { x: [1, { y: "z" }], w: null } };
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [step("r1", 0, "charge", value)],
      });
      const reordered = { nested: { w: null, x: [1, { y: "z" }] }, a: 1 };
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 5,
        entries: [step("r1", 0, "charge", reordered, T0 + 5)],
      });
      expect(await store().getJournal("r1")).toEqual([step("r1", 0, "charge", value)]);
    });

    it("an append at a journaled position with its kind and name but another value, error or wake time is refused (OKE1313) and writes nothing", async () => {
      await startRun(store(), "r1");
      const sleep = {
        runId: "r1",
        seq: 2,
        kind: "sleep" as const,
        label: "wait",
        duration: "0ms",
        wakeAt: T0,
        at: T0,
      };
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [
          step("r1", 0, "charge", { cents: 100 }),
          {
            runId: "r1",
            seq: 1,
            kind: "step",
            name: "ship",
            error: { code: "E1", message: "no stock" },
            at: T0,
          },
          sleep,
        ],
      });
      const before = await store().getJournal("r1");
      const refusals = [
        [step("r1", 0, "charge", { cents: 200 })],
        [step("r1", 0, "charge")],
        [step("r1", 0, "charge", { cents: 100, extra: true })],
        [{ runId: "r1", seq: 1, kind: "step" as const, name: "ship", value: 1, at: T0 }],
        [
          {
            runId: "r1",
            seq: 1,
            kind: "step" as const,
            name: "ship",
            error: { code: "E2", message: "no stock" },
            at: T0,
          },
        ],
        [{ ...sleep, wakeAt: T0 + 1 }],
      ];
      for (const entries of refusals) {
        const err = await rejectionOf(
          store().append({
            runId: "r1",
            owner: "inst-1",
            now: T0,
            entries,
            emits: [msg(`m-${entries[0]!.seq}`)],
          }),
        );
        expect(err).toMatchObject({
          code: "OKE1313",
          message: `journal: run "r1" already has ${entries[0]!.kind} "${entryName(entries[0]!)}" at seq ${entries[0]!.seq} with a different value`,
        });
      }
      // One entry of a batch differing is enough; nothing of that batch is written.
      const err = await rejectionOf(
        store().append({
          runId: "r1",
          owner: "inst-1",
          now: T0,
          entries: [step("r1", 0, "charge", { cents: 100 }), { ...sleep, duration: "1ms" }],
        }),
      );
      expect(err).toMatchObject({ code: "OKE1313" });
      expect(await store().getJournal("r1")).toEqual(before);
      expect(await claimOf(store(), "w", T0, 10)).toEqual([]);
    });

    it("entries and emits commit together; the emitted messages become claimable", async () => {
      await startRun(store(), "r1");
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 5,
        entries: [{ runId: "r1", seq: 0, kind: "emit", name: "sig.a", at: T0 + 5 }],
        emits: [
          msg("m1", { key: "k", parentRunId: "r1" }),
          msg("m2", { signal: "sig.b", parentRunId: "r1" }),
        ],
      });
      expect(await store().getJournal("r1")).toHaveLength(1);
      expect(await store().getMessage("m1")).toMatchObject({
        status: "pending",
        createdAt: T0 + 5,
        parentRunId: "r1",
      });
      expect(await claimOf(store(), "w", T0 + 5)).toMatchObject([{ id: "m1", key: "k", parentRunId: "r1" }]);
      expect(await claimOf(store(), "w", T0 + 5, 10, "sig.b")).toMatchObject([{ id: "m2" }]);
    });

    it("append renews the lease only when leaseMs is given", async () => {
      await startRun(store(), "r1");
      await store().append({ runId: "r1", owner: "inst-1", now: T0 + 100, entries: [step("r1", 0)] });
      expect((await store().getRun("r1"))!.leaseExpiresAt).toBe(T0 + LEASE);
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0 + 200,
        entries: [step("r1", 1)],
        leaseMs: 1_000,
      });
      expect((await store().getRun("r1"))!.leaseExpiresAt).toBe(T0 + 1_200);
    });
  });
}
