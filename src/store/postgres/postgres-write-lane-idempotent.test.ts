// Idempotent re-emits in the postgres write lane: a stored id in a shared statement is the documented re-emit, answered per caller without splitting the statement or logging a warning.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../test/conformance/app-fixture.ts";
import { emitOnce } from "../../signal/emit-once.ts";
import { signal } from "../../signal/signal.ts";
import type { NewMessage, Store } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const schema = freshSchema("lane_dup");
const { logger, records } = recordingLogger();
let store: Store;
/** The store's own pool, counting the INSERTs into messages it runs (each one a statement). */
const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
let inserts = 0;
/** While set, the next INSERT into messages waits for `release` before it is sent (and says it got there). */
let hold: { reached: () => void; released: Promise<void> } | undefined;
const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
pool.query = ((...args: unknown[]) => {
  const text = typeof args[0] === "string" ? args[0] : (args[0] as { text?: string } | undefined)?.text;
  if (text === undefined || !/INSERT INTO\s+"[^"]+"\.messages/i.test(text)) return query(...args);
  inserts++;
  const h = hold;
  hold = undefined;
  if (h === undefined) return query(...args);
  h.reached();
  return h.released.then(() => query(...args));
}) as typeof pool.query;

/**
 * Sends `lone` and holds its statement in flight while `rest` is called, so everything `rest`
 * calls queues behind it and goes in the next statement together; then lets it go. The number of
 * INSERT statements `rest` took (the lone one not counted).
 */
async function behindOneInFlight<T>(
  lone: () => Promise<unknown>,
  rest: () => Promise<T>,
): Promise<{ result: T; statements: number }> {
  let reached: () => void = () => undefined;
  let release: () => void = () => undefined;
  const there = new Promise<void>((r) => (reached = r));
  hold = { reached, released: new Promise<void>((r) => (release = r)) };
  const first = lone();
  await there;
  const before = inserts;
  const result = rest();
  // Every caller reaches the lane within a few turns (emitOnce awaits only microtasks before it).
  for (let turn = 0; turn < 3; turn++) await new Promise((r) => setImmediate(r));
  release();
  await first;
  return { result: await result, statements: inserts - before };
}

const task = signal.once("lane.task", { optional: true });
const msg = (id: string, payload: unknown = { id }): NewMessage => ({
  id,
  signal: task.name,
  key: null,
  payload,
  parentRunId: null,
});
/** app.emit(task, payload, { id }) on this store, as the app runs it (emit-once.ts). */
const emitWithId = (id: string, payload: unknown, now: number): Promise<void> =>
  emitOnce(
    {
      registry: { subscribers: new Map() },
      clock: { now: () => now },
      store,
      enqueue: (m) => store.enqueue([m], now),
    },
    task,
    payload,
    { id },
  );
const warnings = () => records.filter((r) => typeof r.level === "number" && r.level >= 40);

async function rows(ids: string[]): Promise<Array<{ id: string; payload: unknown }>> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const { rows: found } = await c.query<{ id: string; payload: unknown }>(
      `SELECT id, payload FROM "${schema}".messages WHERE id = ANY($1) ORDER BY seq`,
      [ids],
    );
    return found;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  store = await openStore(schema, { pool, logger });
});
afterAll(async () => {
  await store.close();
  await pool.end();
  await dropSchema(schema);
});

describe("postgres write lane: idempotent re-emits", () => {
  it("re-emits of stored ids in a shared statement resolve as the first did: one statement, no warning", async () => {
    await store.enqueue([msg("e1", { first: 1 })], 1);
    await store.enqueue([msg("e3", { first: 3 })], 1);
    records.length = 0;
    const { result: results, statements } = await behindOneInFlight(
      () => store.enqueue([msg("e0")], 2),
      () =>
        Promise.allSettled([
          emitWithId("e1", { again: 1 }, 2),
          emitWithId("e2", { n: 2 }, 2),
          emitWithId("e3", { again: 3 }, 2),
          emitWithId("e4", { n: 4 }, 2),
          emitWithId("e4", { again: 4 }, 2), // the same new id twice in the statement: the first one stands
          emitWithId("e5", { n: 5 }, 2),
        ]),
    );
    expect(results.map((r) => r.status)).toEqual(Array(6).fill("fulfilled"));
    expect(statements).toBe(1);
    expect(warnings()).toEqual([]);
    expect(await rows(["e0", "e1", "e2", "e3", "e4", "e5"])).toEqual([
      { id: "e1", payload: { first: 1 } },
      { id: "e3", payload: { first: 3 } },
      { id: "e0", payload: { id: "e0" } },
      { id: "e2", payload: { n: 2 } },
      { id: "e4", payload: { n: 4 } },
      { id: "e5", payload: { n: 5 } },
    ]);
  });

  it("a shared statement of re-emits only sends no NOTIFY (listeners are not woken to claim nothing)", async () => {
    await store.enqueue([msg("n1")], 9);
    await store.enqueue([msg("n2")], 9);
    const listener = new pg.Client({ connectionString: PG_URL });
    await listener.connect();
    const heard: string[] = [];
    let sentinelHeard: () => void = () => undefined;
    const sentinel = new Promise<void>((r) => (sentinelHeard = r));
    listener.on("notification", (n) => {
      const sentinelOne = n.payload?.includes("lane.sentinel") === true;
      heard.push(sentinelOne ? "sentinel" : "task");
      // The sentinel's statement is the last one sent: NOTIFYs arrive in commit order.
      if (sentinelOne) sentinelHeard();
    });
    try {
      await listener.query(`LISTEN "okengine_${schema}"`);
      const { result: results, statements } = await behindOneInFlight(
        () => store.enqueue([msg("n0")], 10),
        () => Promise.allSettled([emitWithId("n1", { again: 1 }, 10), emitWithId("n2", { again: 2 }, 10)]),
      );
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
      expect(statements).toBe(1);
      // The sentinel: a new message of another signal, announced after everything above.
      await store.enqueue([{ ...msg("n3"), signal: "lane.sentinel" }], 11);
      await sentinel;
      // n0's statement and the sentinel's; the re-emits' statement inserted nothing and said nothing.
      expect(heard).toEqual(["task", "sentinel"]);
    } finally {
      await listener.end();
    }
  });

  it("at the store, the skipped caller alone gets OKE1261, as its own statement would give it", async () => {
    await store.enqueue([msg("s1")], 3);
    records.length = 0;
    const { result: results, statements } = await behindOneInFlight(
      () => store.enqueue([msg("s0")], 4),
      () =>
        Promise.allSettled([
          store.enqueue([msg("s2")], 4),
          store.enqueue([msg("s1")], 4),
          store.enqueue([msg("s3")], 4),
        ]),
    );
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({
      code: "OKE1261",
      message: 'store: message "s1" already exists',
    });
    expect(statements).toBe(1);
    expect(warnings()).toEqual([]);
  });

  it("with Idempotency-Key claims in the same statement: the claims claim, the re-emit resolves, no warning", async () => {
    await store.enqueue([msg("c1", { first: 1 })], 5);
    records.length = 0;
    const { result, statements } = await behindOneInFlight(
      () => store.enqueue([msg("c0")], 6),
      () =>
        Promise.all([
          store.claimIdempotencyKey({
            key: "k-1",
            fingerprint: "fp",
            runId: "run-k-1",
            now: 6,
            lockMs: 60_000,
            windowMs: 3_600_000,
          }),
          Promise.allSettled([emitWithId("c1", { again: 1 }, 6), emitWithId("c2", {}, 6)]),
        ]),
    );
    const [claimed, emitted] = result;
    expect(claimed).toEqual({ kind: "claimed" });
    expect(emitted.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    expect(statements).toBe(1); // the combined statement (emits and the claim) only
    expect(warnings()).toEqual([]);
    expect(await rows(["c1", "c2"])).toEqual([
      { id: "c1", payload: { first: 1 } },
      { id: "c2", payload: {} },
    ]);
  });

  it("an emit of several messages with a stored id still commits none of them (the shared statement falls back)", async () => {
    await store.enqueue([msg("m1", { first: 1 })], 7);
    records.length = 0;
    const { result: results } = await behindOneInFlight(
      () => store.enqueue([msg("m0")], 8),
      () => Promise.allSettled([store.enqueue([msg("m2")], 8), store.enqueue([msg("m3"), msg("m1")], 8)]),
    );
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: "OKE1261" });
    expect((await rows(["m1", "m2", "m3"])).map((r) => r.id)).toEqual(["m1", "m2"]);
    expect(warnings().map((r) => r.msg)).toEqual([
      "group commit: a shared statement of 2 emits and idempotency claims and completions failed; sending each alone",
    ]);
  });
});
