// LISTEN/NOTIFY wake-ups on postgres: across instances, inside caller transactions, payload limits.
import { recordEvents } from "../conformance/harness.ts";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store, StoreEvent } from "../types.ts";
import { decodeWake, encodeWake } from "./postgres-wake.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const T0 = 1_700_000_000_000;
const msg = (id: string, signal: string): NewMessage => ({
  id,
  signal,
  key: null,
  payload: { id },
  parentRunId: null,
});

const enqueuedOf = (signal: string) => (e: StoreEvent) => e.kind === "enqueued" && e.signal === signal;

describe("postgres wake-ups (LISTEN/NOTIFY)", () => {
  const schema = freshSchema("wake");
  let a: Store;
  let b: Store;
  let client: pg.Client;
  beforeAll(async () => {
    // Poll far away: every event in these cases comes from LISTEN.
    a = await openStore(schema, { pollIntervalMs: 3_600_000 });
    b = await openStore(schema, { pollIntervalMs: 3_600_000 });
    client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await a.close();
    await b.close();
    await dropSchema(schema);
  });

  it("an enqueue on one store instance reaches another's subscribers", async () => {
    const rec = recordEvents(b);
    await a.enqueue([msg("x1", "sig.x"), msg("y1", "sig.y")], T0);
    await rec.next(enqueuedOf("sig.x"));
    await rec.next(enqueuedOf("sig.y"));
    rec.stop();
  });

  it("retries and parks reach other instances; a plain unkeyed delivery stays quiet", async () => {
    await a.enqueue([msg("r1", "sig.r"), msg("d1", "sig.d")], T0);
    const rec = recordEvents(b);
    const [r] = await a.claim({ signal: "sig.r", worker: "w", max: 1, now: T0, leaseMs: 1000 });
    const [d] = await a.claim({ signal: "sig.d", worker: "w", max: 1, now: T0, leaseMs: 1000 });
    await a.settle([{ id: d!.id, worker: "w", attempt: 1, status: "delivered" }], T0);
    await a.settle([{ id: r!.id, worker: "w", attempt: 1, status: "pending" }], T0);
    await rec.next((e) => e.kind === "settled" && e.signal === "sig.r");
    expect(rec.events.filter((e) => e.kind === "settled" && e.signal === "sig.d")).toEqual([]);
    await a.startRun({
      id: "run1",
      flow: "f",
      input: null,
      parentRunId: null,
      owner: "o",
      now: T0,
      leaseMs: 1000,
    });
    await a.park({
      runId: "run1",
      owner: "o",
      now: T0,
      entry: { runId: "run1", seq: 0, kind: "sleep", label: "s", duration: "5ms", wakeAt: T0 + 5, at: T0 },
    });
    await rec.next((e) => e.kind === "wake");
    rec.stop();
  });

  it("a store hears its own enqueue once: told at commit, its LISTEN echo ignored", async () => {
    const rec = recordEvents(a);
    await a.enqueue([msg("o1", "sig.own")], T0);
    expect(rec.events).toEqual([{ kind: "enqueued", signal: "sig.own" }]); // synchronous, before any echo
    // Notifications arrive in commit order: once b's marker is heard, a's echo has been too.
    await b.enqueue([msg("o-marker", "sig.own.marker")], T0);
    await rec.next(enqueuedOf("sig.own.marker"));
    expect(rec.events.filter(enqueuedOf("sig.own"))).toHaveLength(1);
    rec.stop();
  });

  it("enqueue in a caller's transaction: NOTIFY fires only on COMMIT, then the message is claimable", async () => {
    const recA = recordEvents(a);
    const recB = recordEvents(b);
    await client.query("BEGIN");
    await a.enqueue([msg("tx1", "sig.tx")], T0, { tx: client });
    expect(await b.getMessage("tx1")).toBeUndefined(); // not visible outside the transaction
    await b.enqueue([msg("tx-marker", "sig.tx.marker")], T0);
    await recA.next(enqueuedOf("sig.tx.marker"));
    await recB.next(enqueuedOf("sig.tx.marker"));
    expect([...recA.events, ...recB.events].filter(enqueuedOf("sig.tx"))).toEqual([]);
    await client.query("COMMIT");
    await recB.next(enqueuedOf("sig.tx"));
    await recA.next(enqueuedOf("sig.tx")); // the caller's own store hears it via LISTEN
    expect(await b.claim({ signal: "sig.tx", worker: "w", max: 5, now: T0, leaseMs: 1000 })).toMatchObject([
      { id: "tx1" },
    ]);
    recA.stop();
    recB.stop();
  });

  it("a rolled-back transaction leaves no message and no wake-up", async () => {
    const rec = recordEvents(b);
    await client.query("BEGIN");
    await a.enqueue([msg("rb1", "sig.rb"), msg("rb2", "sig.rb")], T0, { tx: client });
    const inside = await client.query(
      `SELECT count(*)::int AS n FROM "${schema}".messages WHERE signal = 'sig.rb'`,
    );
    expect(inside.rows[0]).toEqual({ n: 2 });
    await client.query("ROLLBACK");
    await a.enqueue([msg("rb-marker", "sig.rb.marker")], T0);
    await rec.next(enqueuedOf("sig.rb.marker"));
    expect(rec.events.filter(enqueuedOf("sig.rb"))).toEqual([]);
    expect(await b.getMessage("rb1")).toBeUndefined();
    expect(await b.stats("sig.rb", T0)).toMatchObject({ pending: 0, inflight: 0 });
    rec.stop();
  });

  it("the caller's transaction sees its own messages and a duplicate id fails it with OKE1261", async () => {
    await client.query("BEGIN");
    try {
      await a.enqueue([msg("dup1", "sig.dup")], T0, { tx: client });
      await expect(a.enqueue([msg("dup1", "sig.dup")], T0, { tx: client })).rejects.toMatchObject({
        code: "OKE1261",
      });
    } finally {
      await client.query("ROLLBACK");
    }
    await expect(a.enqueue([msg("t", "s")], T0, { tx: { nope: true } })).rejects.toMatchObject({
      code: "OKE1330",
    });
  });

  it("payloads: oversized signal lists degrade to a plain wake", () => {
    const many = Array.from({ length: 2_000 }, (_, i) => `signal.number.${i}`);
    expect(decodeWake(encodeWake({ o: "me", e: many }))).toEqual({
      origin: "me",
      events: [{ kind: "wake" }],
    });
    expect(decodeWake(encodeWake({ e: ["a"], s: ["b"] }))).toEqual({
      origin: undefined,
      events: [
        { kind: "enqueued", signal: "a" },
        { kind: "settled", signal: "b" },
      ],
    });
    expect(decodeWake("not json").events).toEqual([{ kind: "wake" }]);
  });
});

describe("postgres poll-only mode (notify: false)", () => {
  const schema = freshSchema("poll");
  afterAll(() => dropSchema(schema));

  it("sends no NOTIFY, wakes its subscribers every pollIntervalMs, and stops at close", async () => {
    const listening = await openStore(schema, { pollIntervalMs: 3_600_000 });
    const polling = await openStore(schema, { notify: false, pollIntervalMs: 20 });
    try {
      const heard = recordEvents(listening);
      const polled = recordEvents(polling);
      await polled.next((e) => e.kind === "wake");
      await polling.enqueue([msg("p1", "sig.p")], T0);
      await listening.enqueue([msg("p-marker", "sig.p.marker")], T0);
      await heard.next(enqueuedOf("sig.p.marker"));
      expect(heard.events.filter(enqueuedOf("sig.p"))).toEqual([]);
      // The poll-only store still tells its own subscribers at once.
      expect(polled.events).toContainEqual({ kind: "enqueued", signal: "sig.p" });
      await polling.close();
      const count = polled.events.length;
      // A third store's timer proves time passed: several of the closed store's periods.
      const clock = await openStore(schema, { notify: false, pollIntervalMs: 100 });
      await recordEvents(clock).next((e) => e.kind === "wake");
      await clock.close();
      expect(polled.events.length).toBe(count);
    } finally {
      await polling.close();
      await listening.close();
    }
  });
});
