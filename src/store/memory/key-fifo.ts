/** Per-key FIFO lanes of the memory driver: pending messages in emit order and the one inflight. */
import { Deque } from "./deque.ts";

/** What the per-key FIFO needs to know of a message: its emit order. */
export interface Sequenced {
  seq: number;
}

/** The messages of one (signal, key): pending ones in emit order, and the one inflight. */
export interface KeyLane<M extends Sequenced> {
  readonly key: string;
  readonly pending: Deque<M>;
  /** The lease is the lock: while set, nothing else of this key may be claimed. */
  inflight: M | null;
  /** True while the lane sits in the ready queue. */
  queued: boolean;
}

/**
 * Per-key FIFO for one signal. A lane is *ready* when nothing of its key is
 * inflight and it has a pending message; ready lanes wait in a queue, so a
 * claim takes the next head in O(1) without looking at busy keys. Idle, empty
 * lanes are dropped so one-off keys do not accumulate.
 */
export class KeyFifo<M extends Sequenced> {
  private readonly lanes = new Map<string, KeyLane<M>>();
  private readonly ready = new Deque<KeyLane<M>>();

  /** Number of lanes ready to hand out their head. */
  get readyCount(): number {
    return this.ready.size;
  }

  lane(key: string): KeyLane<M> | undefined {
    return this.lanes.get(key);
  }

  /** Seq of the head the next `take` returns, or Infinity when no lane is ready. */
  nextSeq(): number {
    const lane = this.ready.peekFront();
    return lane === undefined ? Infinity : lane.pending.peekFront()!.seq;
  }

  /**
   * Adds a pending message in emit order: the back for new emits, the front
   * for a retried head, the middle only for an operator replay.
   * `urgent` puts the lane at the front of the ready queue (retries requeue at once).
   */
  addPending(key: string, m: M, urgent = false): void {
    const lane = this.laneFor(key);
    const q = lane.pending;
    const back = q.peekBack();
    if (back === undefined || back.seq < m.seq) q.pushBack(m);
    else if (m.seq < q.peekFront()!.seq) q.pushFront(m);
    else q.insertAt(lowerBound(q, m.seq), m);
    this.markReady(lane, urgent);
  }

  /** Takes the head of the next ready lane and marks it inflight. */
  take(): M | undefined {
    const lane = this.ready.shift();
    if (lane === undefined) return undefined;
    lane.queued = false;
    const m = lane.pending.shift()!;
    lane.inflight = m;
    return m;
  }

  /** The inflight message of `key` settled (delivered, dead) or went back to pending. */
  release(key: string, m: M): void {
    const lane = this.lanes.get(key);
    if (lane === undefined || lane.inflight !== m) return;
    lane.inflight = null;
    if (lane.pending.size === 0) this.lanes.delete(key);
    else this.markReady(lane, false);
  }

  /** The inflight head goes back to pending (retry, or a reclaim that must wait); claimable first. */
  retry(key: string, m: M): void {
    const lane = this.lanes.get(key);
    if (lane !== undefined && lane.inflight === m) lane.inflight = null;
    this.addPending(key, m, true);
  }

  /** Marks `m` as the key's inflight message (snapshot restore). */
  setInflight(key: string, m: M): void {
    this.laneFor(key).inflight = m;
  }

  /** True when `key` has a pending message emitted before `seq` (a replayed one). */
  hasOlderPending(key: string, seq: number): boolean {
    const head = this.lanes.get(key)?.pending.peekFront();
    return head !== undefined && head.seq < seq;
  }

  /**
   * Removes pending messages of `key` that `drop` picks (an operator's discard); the rest keep their
   * order. A lane left with nothing pending leaves the ready queue (its head was one of them).
   */
  removePending(key: string, drop: (m: M) => boolean): void {
    const lane = this.lanes.get(key);
    if (lane === undefined || lane.pending.removeWhere(drop) === 0) return;
    if (lane.pending.size > 0) return;
    if (lane.queued) {
      this.ready.removeWhere((l) => l === lane);
      lane.queued = false;
    }
    if (lane.inflight === null) this.lanes.delete(key);
  }

  private laneFor(key: string): KeyLane<M> {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { key, pending: new Deque<M>(), inflight: null, queued: false };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  private markReady(lane: KeyLane<M>, urgent: boolean): void {
    if (lane.queued || lane.inflight !== null || lane.pending.size === 0) return;
    lane.queued = true;
    if (urgent) this.ready.pushFront(lane);
    else this.ready.pushBack(lane);
  }
}

/** First position whose seq is >= `seq`. */
function lowerBound<M extends Sequenced>(q: Deque<M>, seq: number): number {
  let lo = 0;
  let hi = q.size;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (q.at(mid)!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
