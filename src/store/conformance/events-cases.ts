/** Conformance cases of the store's wake-up events. */
import { describe, expect, it } from "vitest";
import {
  claimOf,
  freshStore,
  msg,
  outcome,
  recordEvents,
  sleepingRun,
  startRun,
  step,
  T0,
  type StoreFactory,
} from "./harness.ts";

/**
 * Wake-up events. Drivers may deliver them asynchronously (LISTEN/NOTIFY), so
 * cases wait for an event instead of expecting it synchronously, and prove an
 * absence by waiting for a later marker event.
 */
export function eventCases(factory: StoreFactory): void {
  describe("events via subscribe", () => {
    const store = freshStore(factory);

    it("enqueue announces each signal it added work to", async () => {
      const rec = recordEvents(store());
      await store().enqueue([msg("a1"), msg("b1", { signal: "sig.b" }), msg("a2")], T0);
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.a");
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.b");
      rec.stop();
    });

    it("append with emits announces the emitted signals", async () => {
      await startRun(store(), "r1");
      const rec = recordEvents(store());
      await store().append({
        runId: "r1",
        owner: "inst-1",
        now: T0,
        entries: [step("r1", 0)],
        emits: [msg("m1", { signal: "sig.c" })],
      });
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.c");
      rec.stop();
    });

    it("a settle that frees work announces settled; replay announces enqueued", async () => {
      await store().enqueue(
        [msg("m1"), msg("m2", { signal: "sig.b" }), msg("k1", { signal: "sig.k", key: "k" })],
        T0,
      );
      const [a] = await claimOf(store(), "w", T0);
      const [b] = await claimOf(store(), "w", T0, 1, "sig.b");
      const [k] = await claimOf(store(), "w", T0, 1, "sig.k");
      const rec = recordEvents(store());
      // Dead and delivered unkeyed messages free nothing: no event.
      await store().settle([outcome(a!, "dead"), outcome(b!, "delivered")], T0);
      await store().enqueue([msg("marker", { signal: "sig.marker" })], T0);
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.marker");
      expect(rec.events.filter((e) => e.kind === "settled")).toEqual([]);
      // A keyed message's successor may now be its key's head.
      await store().settle([outcome(k!, "delivered")], T0);
      await rec.next((e) => e.kind === "settled" && e.signal === "sig.k");
      // A retry is claimable again at once.
      await store().replay("sig.a", "all", T0);
      await rec.next((e) => e.kind === "enqueued" && e.signal === "sig.a");
      const [again] = await claimOf(store(), "w", T0);
      await store().settle([outcome(again!, "pending")], T0);
      await rec.next((e) => e.kind === "settled" && e.signal === "sig.a");
      rec.stop();
    });

    it("park and wakeEarly announce a wake; a refused wakeEarly does not", async () => {
      const rec = recordEvents(store());
      await sleepingRun(store(), "r1", T0 + 60_000);
      await rec.next((e) => e.kind === "wake");
      rec.stop();
      const after = recordEvents(store());
      expect(await store().wakeEarly("ghost", T0)).toBe(false);
      await store().enqueue([msg("marker", { signal: "sig.marker" })], T0);
      await after.next((e) => e.kind === "enqueued" && e.signal === "sig.marker");
      expect(after.events.filter((e) => e.kind === "wake")).toEqual([]);
      expect(await store().wakeEarly("r1", T0 + 1)).toBe(true);
      await after.next((e) => e.kind === "wake");
      after.stop();
    });

    it("an unsubscribed listener hears nothing more", async () => {
      const gone = recordEvents(store());
      gone.stop();
      const stays = recordEvents(store());
      await store().enqueue([msg("m1")], T0);
      await stays.next((e) => e.kind === "enqueued");
      expect(gone.events).toEqual([]);
      stays.stop();
    });
  });
}
