// The postgres settle hand-off: a settled keyed message claims its key's next message in the same commit.
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { ClaimedMessage, Store, StoreEvent } from "../types.ts";
import {
  keyedDrain,
  newMessage as msg,
  PG_URL,
  settlement as done,
  T0,
  useSchemaStores,
} from "./test-support.ts";

const LEASE = 60_000;
const yieldTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("postgres settle hand-off", () => {
  const { schema, stores } = useSchemaStores("handoff", { count: 4, poolSize: 3 });

  it("hands each settled key its next message, oldest first, up to max; unkeyed and retried rows are not handed on", async () => {
    const store = stores[0]!;
    const signal = "sig.h.basic";
    await store.enqueue(
      [
        msg("a-1", "a", signal),
        msg("b-1", "b", signal),
        msg("c-1", "c", signal),
        msg("u-1", null, signal),
        msg("a-2", "a", signal),
        msg("b-2", "b", signal),
        msg("c-2", "c", signal),
        msg("a-3", "a", signal),
        msg("u-2", null, signal),
      ],
      T0,
    );
    const first = await store.claim({ signal, worker: "w1", max: 4, now: T0, leaseMs: LEASE });
    expect(first.map((c) => c.id)).toEqual(["a-1", "b-1", "c-1", "u-1"]);
    const byId = new Map(first.map((c) => [c.id, c]));
    // a delivered, b dead, c retried, u delivered; room for one hand-off only.
    const r1 = await store.settle(
      [
        done(byId.get("a-1")!),
        done(byId.get("b-1")!, "dead"),
        done(byId.get("c-1")!, "pending"),
        done(byId.get("u-1")!),
      ],
      T0 + 1,
      { worker: "w2", leaseMs: LEASE, max: 1 },
    );
    expect(r1.applied).toEqual(["a-1", "b-1", "c-1", "u-1"]);
    expect(r1.claimed?.map((c) => [c.id, c.lockedBy, c.attempts, c.leaseExpiresAt])).toEqual([
      ["a-2", "w2", 1, T0 + 1 + LEASE],
    ]);
    expect(r1.claimed?.[0]?.payload).toEqual({ id: "a-2" });
    // b-2 was left behind (max 1): a claim finds it, with c-1 (retried, still the head of c) and u-2.
    const second = await store.claim({ signal, worker: "w3", max: 10, now: T0 + 2, leaseMs: LEASE });
    expect(second.map((c) => c.id).sort()).toEqual(["b-2", "c-1", "u-2"]);
    // a-2 is held (by w2): a-3 is not claimable.
    expect(await store.claim({ signal, worker: "w4", max: 10, now: T0 + 3, leaseMs: LEASE })).toEqual([]);
    const r2 = await store.settle([done(r1.claimed![0]!)], T0 + 4, { worker: "w2", leaseMs: LEASE, max: 5 });
    expect(r2.claimed?.map((c) => c.id)).toEqual(["a-3"]);
    // The last of a key hands nothing on.
    const r3 = await store.settle([done(r2.claimed![0]!)], T0 + 5, { worker: "w2", leaseMs: LEASE, max: 5 });
    expect(r3.claimed).toBeUndefined();
    expect(r3.applied).toEqual(["a-3"]);
  });

  it("a fenced settle hands nothing on, and a successor another transaction has locked is left and announced", async () => {
    const store = stores[0]!;
    const signal = "sig.h.locked";
    await store.enqueue([msg("k-1", "k", signal), msg("k-2", "k", signal), msg("j-1", "j", signal)], T0);
    const [k1, j1] = await store.claim({ signal, worker: "w1", max: 5, now: T0, leaseMs: LEASE });
    expect([k1?.id, j1?.id]).toEqual(["k-1", "j-1"]);
    const fenced = await store.settle([{ ...done(k1!), attempt: 7 }], T0, {
      worker: "w1",
      leaseMs: LEASE,
      max: 5,
    });
    expect(fenced).toEqual({ applied: [] });

    const events: StoreEvent[] = [];
    const off = store.subscribe((e) => events.push(e));
    const locker = new pg.Client({ connectionString: PG_URL });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query(`SELECT 1 FROM "${schema}".messages WHERE id = 'k-2' FOR UPDATE`);
      const r = await store.settle([done(k1!)], T0 + 1, { worker: "w1", leaseMs: LEASE, max: 5 });
      expect(r.applied).toEqual(["k-1"]);
      expect(r.claimed).toBeUndefined();
      expect(events).toContainEqual({ kind: "settled", signal });
      await locker.query("COMMIT");
    } finally {
      await locker.end();
      off();
    }
    // Still pending, and the key is free: a claim takes it.
    const again = await store.claim({ signal, worker: "w2", max: 5, now: T0 + 2, leaseMs: LEASE });
    expect(again.map((c) => c.id)).toEqual(["k-2"]);
  });

  it("4 stores draining 2 000 messages over 50 keys with claims and hand-offs: each claimed once, never two of a key inflight, FIFO per key", async () => {
    const N = 2_000;
    const signal = "sig.h.drain";
    let seed = 7;
    const nextKey = (): string =>
      `k${((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) >>> 16) % 50}`;
    const all = Array.from({ length: N }, (_, i) =>
      msg(`m-${String(i).padStart(4, "0")}`, nextKey(), signal),
    );
    for (let i = 0; i < N; i += 500) await stores[0]!.enqueue(all.slice(i, i + 500), T0);

    const { take, release, expectDrainedOnce } = keyedDrain(all);
    let delivered = 0;
    let now = T0;

    const worker = async (store: Store, name: string): Promise<void> => {
      let local: ClaimedMessage[] = [];
      while (delivered < N) {
        if (local.length === 0) {
          local = await store.claim({ signal, worker: name, max: 5, now: ++now, leaseMs: LEASE });
          take(local);
        }
        if (local.length === 0) {
          await yieldTurn();
          continue;
        }
        await yieldTurn();
        release(local);
        const res = await store.settle(
          local.map((c) => done(c)),
          ++now,
          { worker: name, leaseMs: LEASE, max: 3 },
        );
        expect(res.applied).toHaveLength(local.length);
        delivered += local.length;
        local = res.claimed ?? [];
        take(local);
      }
    };
    await Promise.all(stores.flatMap((s, i) => [worker(s, `s${i}a`), worker(s, `s${i}b`)]));

    await expectDrainedOnce(stores[0]!, signal, now);
  });
});
