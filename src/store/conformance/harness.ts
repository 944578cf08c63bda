/** The conformance harness: a store factory, driver options, and helpers the cases share. */
import { afterEach, beforeEach, expect } from "vitest";
import { JournalLeaseBusy } from "../../errors.ts";
import type {
  AcquiredRun,
  ClaimedMessage,
  JournalEntry,
  NewMessage,
  SleepEntry,
  Settlement,
  Store,
  StoreEvent,
} from "../types.ts";

export interface StoreUnderTest {
  store: Store;
  cleanup(): Promise<void>;
}

/** Returns a ready (opened), empty store; called once per test case. */
export type StoreFactory = () => Promise<StoreUnderTest>;

export interface ConformanceOptions {
  /**
   * The driver joins a caller's transaction in `enqueue(…, { tx })`. When
   * true the suite leaves tx out — the driver tests it itself; when false
   * (default) the suite checks that `tx` is refused with OKE1260.
   */
  supportsTx?: boolean;
  /**
   * The driver implements the optional `enqueueClaimed` (claim at emit): the
   * suite checks it. When false (default) the suite checks it is absent, so a
   * driver cannot carry an untested one.
   */
  claimAtEmit?: boolean;
  /**
   * The driver implements the optional `leaveToLease` (a graceful stop's runs are taken over with no
   * recovery): the suite checks it. When false (default) the suite checks it is absent.
   */
  leaveToLease?: boolean;
  /**
   * The driver implements the optional `leaveClaimsToLease` (a graceful stop's running claims keep
   * their lease, and the claim after the lapse is the same attempt): the suite checks it. When false
   * (default) the suite checks it is absent.
   */
  leaveClaimsToLease?: boolean;
  /**
   * The driver implements the optional `resettleDelivered` (a durable consumer's run that fails after
   * its park settles its delivered message again: retried, or dead): the suite checks it. When false
   * (default) the suite checks it is absent.
   */
  resettleDelivered?: boolean;
  /**
   * The driver keeps releaseRun's optional `hold` and shows it as `RunRecord.held` while the run has
   * no holder: the suite checks it. When false (default) it checks nothing of it — a driver may drop
   * the note, and operators then see such a run as running with no holder.
   */
  releaseHold?: boolean;
  /**
   * The driver implements the optional `terminateRun` (an operator ends a run no one holds, for
   * good): the suite checks it. When false (default) the suite checks it is absent.
   */
  terminateRun?: boolean;
  /**
   * The driver implements the optional `lastTapePosition` (the store-wide bound a live stream's
   * resume is checked against): the suite checks it. When false (default) the suite checks it is
   * absent.
   */
  lastTapePosition?: boolean;
  /**
   * The driver's `stats` reports the optional `deliveredFailed` (delivered messages with a failure:
   * failed broadcast copies): the suite checks it is exact. When false (default) the suite checks it
   * is absent.
   */
  deliveredFailed?: boolean;
  /**
   * The driver implements the optional `discardPending` (an operator removes pending messages: a
   * queue nothing consumes any more): the suite checks it. When false (default) the suite checks it
   * is absent.
   */
  discardPending?: boolean;
  /**
   * The driver implements the optional `tapeGap` (what a live reader resuming after a position can no
   * longer get: pruned or expired entries): the suite checks it. When false (default) the suite
   * checks it is absent.
   */
  tapeGap?: boolean;
  /**
   * The driver implements the optional `getJournalEnds` (a long journal's first and last entries
   * without the middle): the suite checks it. When false (default) the suite checks it is absent.
   */
  journalEnds?: boolean;
}

/** An arbitrary fixed epoch so no case depends on the wall clock. */
export const T0 = 1_700_000_000_000;
export const LEASE = 30_000;

/** Installs beforeEach/afterEach giving every case a fresh store; call inside a describe. */
export function freshStore(factory: StoreFactory): () => Store {
  let current: StoreUnderTest | undefined;
  beforeEach(async () => {
    current = await factory();
  });
  afterEach(async () => {
    const c = current;
    current = undefined;
    await c?.cleanup();
  });
  return () => {
    if (current === undefined) throw new Error("conformance: store used outside a test case");
    return current.store;
  };
}

export function msg(
  id: string,
  opts: { signal?: string; key?: string | null; payload?: unknown; parentRunId?: string | null } = {},
): NewMessage {
  return {
    id,
    signal: opts.signal ?? "sig.a",
    key: opts.key ?? null,
    payload: opts.payload ?? { id },
    parentRunId: opts.parentRunId ?? null,
  };
}

/** Ids `prefix-0 … prefix-(n-1)`, zero-padded so they sort like their order. */
export const ids = (prefix: string, n: number): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, "0")}`);

export const claimOf = (
  store: Store,
  worker: string,
  now: number,
  max = 100,
  signal = "sig.a",
  leaseMs = LEASE,
): Promise<ClaimedMessage[]> => store.claim({ signal, worker, max, now, leaseMs });

/** Settlement for a claimed message, from its own holder and attempt. */
export const outcome = (
  c: ClaimedMessage,
  status: Settlement["status"],
  failure?: { code: string; message: string; at: number },
): Settlement => ({
  id: c.id,
  worker: c.lockedBy,
  attempt: c.attempts,
  status,
  ...(failure === undefined ? {} : { failure: { ...failure, attempt: c.attempts } }),
});

export const idsOf = (xs: readonly { id: string }[]): string[] => xs.map((x) => x.id);
export const sortedIds = (xs: readonly { id: string }[]): string[] => idsOf(xs).sort();

/** Claims one message at a time and delivers it, returning the delivery order. */
export async function drainInOrder(store: Store, now: number, signal = "sig.a"): Promise<string[]> {
  const order: string[] = [];
  for (;;) {
    const got = await store.claim({ signal, worker: "drain", max: 1, now, leaseMs: LEASE });
    if (got.length === 0) return order;
    order.push(got[0]!.id);
    const res = await store.settle([outcome(got[0]!, "delivered")], now);
    expect(res.applied).toEqual([got[0]!.id]);
  }
}

export interface RunOpts {
  owner?: string;
  now?: number;
  leaseMs?: number;
  flow?: string;
  input?: unknown;
  parentRunId?: string | null;
}

export const startRun = (store: Store, id: string, o: RunOpts = {}): Promise<AcquiredRun> =>
  store.startRun({
    id,
    flow: o.flow ?? "flow.a",
    input: o.input ?? { run: id },
    parentRunId: o.parentRunId ?? null,
    owner: o.owner ?? "inst-1",
    now: o.now ?? T0,
    leaseMs: o.leaseMs ?? LEASE,
  });

export const step = (
  runId: string,
  seq: number,
  name = `step-${seq}`,
  value: unknown = seq,
  at = T0,
): JournalEntry => ({
  runId,
  seq,
  kind: "step",
  name,
  value,
  at,
});

export const sleepEntry = (runId: string, seq: number, wakeAt: number, at = T0): SleepEntry => ({
  runId,
  seq,
  kind: "sleep",
  label: `sleep-${seq}`,
  duration: `${wakeAt - at}ms`,
  wakeAt,
  at,
});

/** Starts a run and parks it until `wakeAt`. */
export async function sleepingRun(store: Store, id: string, wakeAt: number, o: RunOpts = {}): Promise<void> {
  const owner = o.owner ?? "inst-1";
  const now = o.now ?? T0;
  await startRun(store, id, { ...o, owner, now });
  await store.park({ runId: id, owner, now, entry: sleepEntry(id, 0, wakeAt, now) });
}

/** Records a store's events; `next` resolves on the first matching event (already seen ones count). */
export function recordEvents(store: Store): {
  events: StoreEvent[];
  next(match: (e: StoreEvent) => boolean): Promise<StoreEvent>;
  stop(): void;
} {
  const events: StoreEvent[] = [];
  const waiters: { match: (e: StoreEvent) => boolean; resolve: (e: StoreEvent) => void }[] = [];
  const stop = store.subscribe((e) => {
    events.push(e);
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.match(e)) waiters.splice(i, 1)[0]!.resolve(e);
    }
  });
  return {
    events,
    stop,
    next(match) {
      const seen = events.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      // No timer: a missing event fails the case through the test timeout.
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

/** The error `p` rejects with; fails the case if it resolves. */
export async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  expect.fail("expected the call to be refused, but it resolved");
}

/** Asserts `p` rejects with JournalLeaseBusy for `runId`, with the documented text. */
export async function expectBusy(p: Promise<unknown>, runId: string): Promise<void> {
  const err = await rejectionOf(p);
  expect(err).toBeInstanceOf(JournalLeaseBusy);
  expect((err as JournalLeaseBusy).message).toBe(`journal: run "${runId}" is leased by another instance`);
  expect((err as JournalLeaseBusy).runId).toBe(runId);
}
