/** Store contract for fan-out: the fleet's broadcast subscriptions and the retained tapes of live signals. */
import type { Unsubscribe } from "./record-types.ts";

/** One flow that some running instance binds to a broadcast signal. */
export interface BroadcastSubscription {
  signal: string;
  flow: string;
}

export interface SubscriptionHeartbeat {
  /** The app instance (its claim holder id). */
  instance: string;
  /** Everything the instance binds now; replaces what it announced before. */
  subscriptions: BroadcastSubscription[];
  now: number;
  /** The instance counts as running these flows until then. */
  expiresAt: number;
}

/** A subscription nobody has renewed: its instances stopped announcing it. */
export interface LapsedSubscription extends BroadcastSubscription {
  /** Latest `expiresAt` any instance gave it. */
  expiredAt: number;
}

export interface TapeRef {
  signal: string;
  key: string;
}

/** An entry to append to a live signal's tape. */
export interface NewTapeEntry {
  /** Unique entry id; appending an id already on the tape is a no-op (replayed durable emits). */
  id: string;
  signal: string;
  /** One tape per (signal, key); "" for the signal's unkeyed tape. */
  key: string;
  /** Validated, JSON-serialisable. */
  payload: unknown;
}

export interface TapeEntry extends NewTapeEntry {
  /**
   * Position on its tape: increasing in commit order, never reused (pruning
   * does not reset it), so "after position p" is an exact resume point.
   */
  position: number;
  createdAt: number;
}

export interface TapeRead {
  signal: string;
  key: string;
  /** Entries with a position greater than this (0 = from the start). */
  after: number;
  /** Entries created before this are expired: never returned, pruned or not. */
  notBefore: number;
  /** Read at most this many; never more than the position `upTo` when given. */
  limit: number;
  upTo?: number;
}

/** What a reader resuming after `after` can no longer get (Store.tapeGap). */
export interface TapeGapRead {
  signal: string;
  key: string;
  /** The reader's last position. */
  after: number;
  /** Entries created before this are expired (as TapeRead.notBefore). */
  notBefore: number;
}

/**
 * The fan-out half of the Store. Broadcast events themselves travel as once
 * messages (one copy per subscribed flow, see signal/broadcast-runtime.ts), so
 * they commit with a journal append like any emit; what is new here is the
 * fleet-wide record of who runs which flow, and the tapes.
 */
export interface FanoutStore {
  /**
   * Upserts `instance`'s subscriptions with their expiry and drops the ones it no longer lists. It may
   * also drop other instances' rows of the pairs it lists that expired at or before `now` (the
   * PostgreSQL driver does, so restarts leave no rows behind): those pairs stay live through its own.
   */
  heartbeatSubscriptions(req: SubscriptionHeartbeat): Promise<void>;
  /** Distinct (signal, flow) pairs with at least one instance whose expiry is after `now`. */
  liveSubscriptions(now: number): Promise<BroadcastSubscription[]>;
  /** Pairs every instance of which expired at or before `before`, oldest first. */
  lapsedSubscriptions(before: number, limit: number): Promise<LapsedSubscription[]>;
  /** Forgets a lapsed pair (every instance row of it that expired at or before `before`). */
  forgetSubscription(sub: BroadcastSubscription, before: number): Promise<void>;

  /** Appends entries in order; resolves once committed with their positions. */
  appendTape(entries: NewTapeEntry[], now: number): Promise<TapeEntry[]>;
  /** Entries after a position in position order. */
  readTape(req: TapeRead): Promise<TapeEntry[]>;
  /**
   * The last position of the tape's entries (0 when it has none: never appended to, or pruned
   * empty), where its readers start following. No bound for a resume: a pruned tape's head drops,
   * and a position read from it is still a valid resume point (see `lastTapePosition`).
   */
  tapeHead(signal: string, key: string): Promise<number>;
  /**
   * The last position given on any tape of the store (0 before the first append): every position a
   * reader ever saw is at most this, pruning never lowers it, and no tape has given one above it.
   * A resume (SSE `Last-Event-ID`) above it names no entry; at or below it, it is followed.
   * Optional, as it came after the first drivers: every built-in driver has it. Without it a resume is
   * followed from the position asked, unchecked, so a made-up id above every position waits in
   * silence until the positions catch up (the live hub says so once, at its first such resume).
   */
  lastTapePosition?(): Promise<number>;
  /**
   * Deletes up to `limit` entries of `signal` created before `before`; returns how many. A driver
   * with `tapeGap` records the highest position it deleted of the signal (kept for good, one
   * number per signal).
   */
  pruneTape(signal: string, before: number, limit: number): Promise<number>;
  /**
   * The highest position after `req.after` that a reader of the tape can no longer get, 0 when it
   * gets everything after it: the highest position pruned of the signal, when above `after` (one
   * number per signal, so for a keyed tape it may name a gap another key's entries made: a gap is
   * never missed, and may be reported where the key had none), or the tape's highest expired entry
   * above `after` not pruned yet. Optional (it came after the first drivers; every built-in driver
   * has it): without it a resume past pruned entries is followed in silence.
   */
  tapeGap?(req: TapeGapRead): Promise<number>;
  /**
   * Hears committed appends, from any process sharing the store: the tape, or
   * "all" when every tape should be re-read (a poll tick, a reconnect, a
   * notification too big to name its tapes).
   */
  subscribeTapes(listener: (tape: TapeRef | "all") => void): Unsubscribe;
}
