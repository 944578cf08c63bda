// A postgres settle sent again after its commit (the client lost the answer) returns what the first commit did.
import { describe, expect, it } from "vitest";
import type { SettleResult } from "../types.ts";
import { newMessage as msg, settlement as done, T0, useSchemaStores } from "./test-support.ts";

const LEASE = 60_000;
const shape = (r: SettleResult) => ({
  applied: r.applied,
  claimed: r.claimed?.map((c) => [c.id, c.lockedBy, c.attempts, c.leaseExpiresAt]),
});

describe("postgres settle retried after its commit", () => {
  const db = useSchemaStores("settleretry", { poolSize: 2 });

  it("all-delivered batch with hand-off: the resend returns the same applied and the handed messages as claimed", async () => {
    const { store } = db;
    const signal = "sig.r.delivered";
    await store.enqueue(
      [msg("a-1", "a", signal), msg("b-1", "b", signal), msg("a-2", "a", signal), msg("b-2", "b", signal)],
      T0,
    );
    const got = await store.claim({ signal, worker: "w1", max: 10, now: T0, leaseMs: LEASE });
    expect(got.map((c) => c.id)).toEqual(["a-1", "b-1"]);
    const req = got.map((c) => done(c));
    const handoff = { worker: "w1", leaseMs: LEASE, max: 2 };
    const first = await store.settle(req, T0 + 1, handoff);
    expect(shape(first)).toEqual({
      applied: ["a-1", "b-1"],
      claimed: [
        ["a-2", "w1", 1, T0 + 1 + LEASE],
        ["b-2", "w1", 1, T0 + 1 + LEASE],
      ],
    });
    const again = await store.settle(req, T0 + 1, handoff);
    expect(shape(again)).toEqual(shape(first));
    // Nothing changed on the resend: the handed messages are still at attempt 1 under w1.
    expect((await store.getMessage("a-2"))?.attempts).toBe(1);
    // A settle of the same request at another time is a stale one: fenced off.
    expect(shape(await store.settle(req, T0 + 2, handoff))).toEqual({ applied: [], claimed: undefined });
  });

  it("general batch (dead, retry, failure) with hand-off to the settling worker: same result on the resend, one failure recorded", async () => {
    const { store } = db;
    const signal = "sig.r.general";
    await store.enqueue(
      [msg("c-1", "c", signal), msg("d-1", "d", signal), msg("c-2", "c", signal), msg("u-1", null, signal)],
      T0,
    );
    const got = await store.claim({ signal, worker: "w1", max: 10, now: T0, leaseMs: LEASE });
    const byId = new Map(got.map((c) => [c.id, c]));
    const req = [done(byId.get("c-1")!, "dead"), done(byId.get("d-1")!, "pending"), done(byId.get("u-1")!)];
    const handoff = { worker: "w1", leaseMs: LEASE, max: 1 };
    const first = await store.settle(req, T0 + 1, handoff);
    expect(shape(first)).toEqual({
      applied: ["c-1", "d-1", "u-1"],
      claimed: [["c-2", "w1", 1, T0 + 1 + LEASE]],
    });
    const again = await store.settle(req, T0 + 1, handoff);
    expect(shape(again)).toEqual(shape(first));
    expect((await store.getMessage("d-1"))?.failures).toHaveLength(1);
  });

  it("a lone settle and a batch without hand-off: the resend counts as applied", async () => {
    const { store } = db;
    const signal = "sig.r.plain";
    await store.enqueue([msg("p-1", null, signal), msg("p-2", null, signal), msg("p-3", null, signal)], T0);
    const got = await store.claim({ signal, worker: "w1", max: 10, now: T0, leaseMs: LEASE });
    const one = [done(got[0]!)];
    expect((await store.settle(one, T0 + 1)).applied).toEqual(["p-1"]);
    expect((await store.settle(one, T0 + 1)).applied).toEqual(["p-1"]);
    const rest = got.slice(1).map((c) => done(c));
    expect((await store.settle(rest, T0 + 1)).applied).toEqual(["p-2", "p-3"]);
    expect((await store.settle(rest, T0 + 1)).applied).toEqual(["p-2", "p-3"]);
    const general = [{ ...done(got[1]!, "pending") }];
    // Another outcome for a row that settled is not this settle: fenced off.
    expect((await store.settle(general, T0 + 1)).applied).toEqual([]);
  });
});
