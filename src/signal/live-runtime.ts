/** Live tapes: appends at emit, replay-then-follow readers (app.live, SSE), retention pruning. */
import type { Clock } from "../clock/clock.ts";
import { parseDuration } from "../clock/duration.ts";
import type { JournalSession } from "../durable/session.ts";
import type { Logger } from "../log/logger.ts";
import type { TapeEntry } from "../store/fanout-types.ts";
import type { Store } from "../store/types.ts";
import { prepareEmit } from "./emit.ts";
import type { LiveSignal, SignalHandle } from "./signal.ts";

/** Retention of a live signal declared without one. */
export const DEFAULT_LIVE_RETENTION = "24h";
/** Entries read per query, while replaying and while following. */
const PAGE = 500;
const PRUNE_BATCH = 1_000;
/** Pruning runs this often at most (and at least once per retention). */
const PRUNE_EVERY_MS = 10 * 60_000;

/** One entry as a reader sees it. `position` is its place on the tape: resume with `after: position`. */
export interface LiveEntry<P = unknown> {
  position: number;
  key: string | null;
  payload: P;
  at: number;
}

export interface LiveOptionsRead {
  /** The tape of this key (omit for the signal's unkeyed tape). */
  key?: string;
  /** Replay entries after this position (default 0: every retained entry), then follow. */
  after?: number;
  /**
   * Called once, before the first entry, when entries after `after` are gone for good — pruned or
   * expired by retention while the reader was away — with the highest such position: the reader
   * missed something and should read its state afresh. Not called for `after` 0 (a reader that asks
   * for everything retained expects nothing older), nor on a driver without `Store.tapeGap`. For a
   * keyed signal the prune it knows of is the signal's, so it may be called for a key that lost
   * nothing; it is never left out when one did.
   */
  onGap?: (gap: LiveGap) => void;
}

/** What `onGap` is told: entries in (after, through] may be gone. */
export interface LiveGap {
  /** The reader's position. */
  after: number;
  /** The highest position retention removed (or expired) after it. */
  through: number;
}

export type LiveListener<P> = (entry: LiveEntry<P>) => void;

/**
 * Backpressure on a reader's replay (an SSE stream's catch-up). Checked before each replayed entry:
 * while `full()` the replay of that reader stops where it is — the tape's other readers and its
 * follow go on, nothing waits on a slow client — and goes on once the reader calls `resume`.
 * Following (entries as they are appended) is not paced: the reader bounds it itself.
 */
export interface ReplayPace {
  /** True while the reader takes no more entries (its buffer is past its bound). */
  full(): boolean;
  /** The replay stopped because the reader was full: call `resume` once it can take more. */
  paused(resume: () => void): void;
  /** The replay is over (the reader was not full): entries now come as the tape is followed. */
  following(): void;
}

export const retentionMs = (s: LiveSignal): number => parseDuration(s.retention ?? DEFAULT_LIVE_RETENTION);

interface Reader {
  cursor: number;
  live: boolean;
  closed: boolean;
  listener: LiveListener<unknown>;
  pace: ReplayPace | undefined;
  /** Waiting for its pace's resume: no replay round for it until then. */
  paused: boolean;
  /** Told of a gap before its first entry, then cleared (LiveOptionsRead.onGap). */
  onGap: ((gap: LiveGap) => void) | undefined;
  /** The rest of the replay page it was paused in (at most one page: memory stays bounded). */
  pending: TapeEntry[];
}

/**
 * The readers of one tape in this process. Every read goes through one chain,
 * so a reader's catch-up and the shared follow never interleave: a new reader
 * replays (cursor, head] and then joins the followers, who receive each entry
 * read once for all of them — 10 000 browsers on one tape cost one query per
 * append, not 10 000.
 */
class TapeFeed {
  head: number | undefined;
  readonly readers = new Set<Reader>();
  /** The reads queued and in flight, in order; LiveRuntime.stop waits for it. */
  chain: Promise<void> = Promise.resolve();
  private again = false;
  private pulling = false;

  constructor(
    private readonly rt: LiveRuntime,
    readonly signal: LiveSignal,
    readonly key: string,
  ) {}

  private run(task: () => Promise<void>): void {
    this.chain = this.chain.then(task).catch((err: unknown) => {
      this.rt.logger.warn(
        { err, signal: this.signal.name, key: this.key },
        "live: tape read failed; retrying on the next wake",
      );
    });
  }

  private read(after: number, upTo?: number, notBefore?: number): Promise<TapeEntry[]> {
    return this.rt.store.readTape({
      signal: this.signal.name,
      key: this.key,
      after,
      notBefore: notBefore ?? this.rt.clock.now() - retentionMs(this.signal),
      limit: PAGE,
      ...(upTo === undefined ? {} : { upTo }),
    });
  }

  private deliver(r: Reader, e: TapeEntry): void {
    // Stop closes every reader: a read that was out then delivers nothing when it answers.
    if (r.closed || e.position <= r.cursor) return;
    r.cursor = e.position;
    try {
      r.listener({
        position: e.position,
        key: e.key === "" ? null : e.key,
        payload: e.payload,
        at: e.createdAt,
      });
    } catch (err) {
      this.rt.logger.error({ err, signal: this.signal.name, key: this.key }, "live: a listener threw");
    }
  }

  /**
   * Replays (cursor, head] to one reader, page by page, until it is caught up — then it follows — or
   * its pace says it is full: then it keeps the rest of the page and waits for its resume, holding
   * up no one (the next round reads on from its cursor, up to the head of then).
   */
  private async replay(r: Reader, head: number): Promise<void> {
    // Kept entries that expired while the reader was paused are not sent (retention holds on read).
    // One bound for the gap check and the reads after it: an entry expiring between the two would
    // be neither reported nor sent.
    const notBefore = this.rt.clock.now() - retentionMs(this.signal);
    if (r.onGap !== undefined) {
      await this.checkGap(r, notBefore);
      if (r.closed || this.rt.stopped) return;
    }
    let page = r.pending.filter((e) => e.createdAt >= notBefore);
    r.pending = [];
    // A kept page was read up to an older head: only a page read now, short of a full one, says the
    // reader is caught up to this round's head.
    let caughtUp = false;
    const pause = (rest: TapeEntry[]): void => {
      r.pending = rest;
      r.paused = true;
      r.pace?.paused(() => {
        if (r.closed || !r.paused) return;
        r.paused = false;
        this.wake();
      });
    };
    for (;;) {
      if (r.closed || this.rt.stopped) return;
      if (page.length === 0) {
        page = await this.read(r.cursor, head, notBefore);
        if (r.closed || this.rt.stopped) return;
        caughtUp = page.length < PAGE;
      }
      for (let i = 0; i < page.length; i++) {
        if (r.closed) return;
        if (r.pace?.full() === true) return pause(page.slice(i));
        this.deliver(r, page[i]!);
      }
      page = [];
      if (caughtUp) break;
    }
    // Caught up; it follows only with room, else the slow-client bound of following would cut it
    // for what the replay queued (the round after its resume finds nothing left and lets it follow).
    if (r.pace?.full() === true) return pause([]);
    r.cursor = Math.max(r.cursor, head);
    r.live = true;
    r.pace?.following();
  }

  /** Before a resuming reader's first entry: whether retention took entries after its position. */
  private async checkGap(r: Reader, notBefore: number): Promise<void> {
    const onGap = r.onGap!;
    const store = this.rt.store;
    if (r.cursor === 0 || store.tapeGap === undefined) {
      r.onGap = undefined;
      return;
    }
    // Kept until answered: a check that failed (an outage) runs again with the next round's replay,
    // before any entry, instead of letting the reader go on untold.
    const through = await store.tapeGap({
      signal: this.signal.name,
      key: this.key,
      after: r.cursor,
      notBefore,
    });
    r.onGap = undefined;
    if (through === 0 || r.closed) return;
    try {
      onGap({ after: r.cursor, through });
    } catch (err) {
      this.rt.logger.error({ err, signal: this.signal.name, key: this.key }, "live: an onGap listener threw");
    }
  }

  add(r: Reader): void {
    this.readers.add(r);
    this.wake();
  }

  /** Something was appended (or a reader joined): catch new readers up, then read after the head for all. */
  wake(): void {
    if (this.pulling) {
      this.again = true;
      return;
    }
    this.pulling = true;
    this.run(async () => {
      try {
        do {
          this.again = false;
          await this.sync();
        } while (this.again && !this.rt.stopped);
      } finally {
        this.pulling = false;
      }
    });
  }

  /** One catch-up and follow round; no read goes out once the runtime stopped (checked after every await). */
  private async sync(): Promise<void> {
    if (this.rt.stopped) return;
    if (this.head === undefined) {
      await this.rt.store.open();
      if (this.rt.stopped) return;
      this.head = await this.rt.store.tapeHead(this.signal.name, this.key);
    }
    const head = this.head;
    // A new reader replays (cursor, head]; what was appended since is everyone's next read. A paused
    // reader is skipped: its resume wakes the feed again.
    for (const r of this.readers) {
      if (r.live || r.paused) continue;
      await this.replay(r, head);
    }
    for (;;) {
      if (this.rt.stopped) return;
      const page = await this.read(this.head);
      for (const e of page) {
        this.head = Math.max(this.head, e.position);
        for (const r of this.readers) if (r.live) this.deliver(r, e);
      }
      if (page.length < PAGE) break;
    }
  }
}

export interface LiveRuntimeOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  signals: ReadonlyMap<string, SignalHandle>;
}

export class LiveRuntime {
  readonly store: Store;
  readonly clock: Clock;
  readonly logger: Logger;
  private readonly feeds = new Map<string, TapeFeed>();
  private unsubscribeStore: (() => void) | undefined;
  private cancelPrune: (() => void) | undefined;
  private pruning: Promise<void> | undefined;
  private halted = false;

  constructor(private readonly o: LiveRuntimeOptions) {
    this.store = o.store;
    this.clock = o.clock;
    this.logger = o.logger;
  }

  /** True once stop() was called: no tape read, prune or delivery starts after it. */
  get stopped(): boolean {
    return this.halted;
  }

  private get liveSignals(): LiveSignal[] {
    return [...this.o.signals.values()].filter((s): s is LiveSignal => s.delivery === "live");
  }

  /** Starts retention pruning (the app calls it at boot). */
  start(): void {
    const signals = this.liveSignals;
    if (signals.length === 0) return;
    let every = PRUNE_EVERY_MS;
    for (const sig of signals) every = Math.min(every, retentionMs(sig));
    const arm = (): void => {
      if (this.halted) return;
      this.cancelPrune = this.clock.at(this.clock.now() + every, () => {
        if (this.halted) return;
        this.pruning = this.prune()
          .then(() => undefined)
          .catch((err: unknown) => this.logger.warn({ err }, "live: pruning failed; retrying later"))
          .finally(arm);
      });
    };
    arm();
  }

  /**
   * Deletes expired entries of every live signal, in batches. Readers never see them either way.
   * No batch goes out after stop: one would read the clock after it (time may have moved on since).
   */
  async prune(): Promise<number> {
    let total = 0;
    for (const s of this.liveSignals) {
      if (this.halted) break;
      const before = this.clock.now() - retentionMs(s);
      for (;;) {
        const n = await this.store.pruneTape(s.name, before, PRUNE_BATCH);
        total += n;
        if (n < PRUNE_BATCH || this.halted) break;
      }
    }
    return total;
  }

  /**
   * Appends one entry to the tape of (signal, key). Inside a durable flow the
   * entry id is journaled first and the append repeated on replay (a no-op
   * for an id already on the tape), so a crash never loses nor doubles it.
   */
  async emit(
    target: LiveSignal,
    payload: unknown,
    options: { key?: string | undefined; id?: string | undefined } | undefined,
    producer: { flow: string; runId: string | null },
    session?: JournalSession,
  ): Promise<void> {
    const message = await prepareEmit(
      // A tape is its own subscriber: entries wait for readers for the retention.
      { subscriberCount: () => 1, now: this.clock.now() },
      target,
      payload,
      options,
      producer,
    );
    const id = session
      ? (await session.once("emit", target.name, () => ({ messageId: message.id, key: message.key })))
          .messageId
      : message.id;
    await this.store.appendTape(
      [{ id, signal: target.name, key: message.key ?? "", payload: message.payload }],
      this.clock.now(),
    );
  }

  /**
   * Hears the store's appends, once for every tape of this process. Kept only
   * once the store accepted it: a subscribe that throws is not remembered, so
   * the reader's caller sees the error and the next reader subscribes again.
   * An accepted subscription is the store's to keep served through its own
   * outages (the postgres driver retries its LISTEN connection and polls).
   */
  private follow(): void {
    if (this.unsubscribeStore !== undefined) return;
    try {
      this.unsubscribeStore = this.store.subscribeTapes((t) => {
        if (t === "all") for (const f of this.feeds.values()) f.wake();
        else this.feeds.get(JSON.stringify([t.signal, t.key]))?.wake();
      });
    } catch (err) {
      this.logger.warn({ err }, "live: subscribing to tape appends failed; the next reader tries again");
      throw err;
    }
  }

  /**
   * Replays the tape after a position, then follows it. Returns the unsubscribe. With a `pace` the
   * replay waits while the reader is full (an SSE stream), without holding up the tape's other readers.
   */
  live<P>(
    signal: LiveSignal<P>,
    options: LiveOptionsRead,
    listener: LiveListener<P>,
    pace?: ReplayPace,
  ): () => void {
    if (
      typeof signal !== "object" ||
      signal === null ||
      signal.kind !== "signal" ||
      signal.delivery !== "live"
    )
      throw new TypeError(
        "app.live(signal, options, listener): the first argument must be a signal.live handle",
      );
    const key = options.key ?? "";
    if (typeof key !== "string") throw new TypeError("app.live: key must be a string");
    const after = options.after ?? 0;
    if (!Number.isSafeInteger(after) || after < 0)
      throw new TypeError(
        `app.live: after must be a tape position (a non-negative integer), got ${String(after)}`,
      );
    if (typeof listener !== "function") throw new TypeError("app.live: listener must be a function");
    if (options.onGap !== undefined && typeof options.onGap !== "function")
      throw new TypeError("app.live: onGap must be a function");
    // After stop nothing is read or delivered: a reader then gets nothing, and the store is not
    // subscribed again (the app refuses its callers once stopping; an SSE stream is being closed).
    if (this.halted) return () => undefined;
    this.follow();
    const name = JSON.stringify([signal.name, key]);
    let feed = this.feeds.get(name);
    if (!feed) this.feeds.set(name, (feed = new TapeFeed(this, signal, key)));
    const reader: Reader = {
      cursor: after,
      live: false,
      closed: false,
      listener: listener as LiveListener<unknown>,
      pace,
      paused: false,
      pending: [],
      onGap: options.onGap,
    };
    feed.add(reader);
    const f = feed;
    return () => {
      reader.closed = true;
      reader.pending = [];
      f.readers.delete(reader);
      if (f.readers.size === 0 && this.feeds.get(name) === f) this.feeds.delete(name);
    };
  }

  /**
   * Stops pruning and following: every reader is closed at once (an entry a read in flight brings
   * back is not delivered), then waits — up to `timeoutMs` — for the prune and the tape reads in
   * flight, so the store is not closed under them.
   */
  async stop(timeoutMs = Infinity): Promise<void> {
    this.halted = true;
    this.cancelPrune?.();
    this.unsubscribeStore?.();
    this.unsubscribeStore = undefined;
    const inFlight: Array<Promise<unknown>> = [];
    if (this.pruning !== undefined) inFlight.push(this.pruning);
    for (const feed of this.feeds.values()) {
      for (const r of feed.readers) r.closed = true;
      feed.readers.clear();
      inFlight.push(feed.chain);
    }
    this.feeds.clear();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(inFlight),
      new Promise<void>((r) => {
        if (!Number.isFinite(timeoutMs)) return;
        timer = setTimeout(r, timeoutMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }
}

/**
 * What `fx.live(signal, { key })` returns: an HTTP flow that returns it answers
 * its request with the tape as a `text/event-stream` (src/http/sse.ts).
 */
export class LiveStream<P = unknown> {
  /** Phantom: the payload type, for inference only. */
  declare readonly __payload?: P;
  constructor(
    readonly signal: LiveSignal<P>,
    readonly key: string | undefined,
  ) {}
}

export const isLiveStream = (v: unknown): v is LiveStream => v instanceof LiveStream;

/** Checks fx.live's arguments and makes the stream handle. */
export function liveStream<P>(
  signal: LiveSignal<P>,
  options: { key?: string } | undefined,
  flowName: string,
): LiveStream<P> {
  if (typeof signal !== "object" || signal === null || signal.kind !== "signal" || signal.delivery !== "live")
    throw new TypeError(
      `fx.live(signal, options): the first argument must be a signal.live handle (flow "${flowName}")`,
    );
  const key = options?.key;
  if (key !== undefined && (typeof key !== "string" || key === ""))
    throw new TypeError(
      `fx.live("${signal.name}"): key must be a non-empty string, got ${JSON.stringify(key)}`,
    );
  return new LiveStream(signal, key);
}
