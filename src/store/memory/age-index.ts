/** AgeIndex: the oldest pending message of a signal, O(1) amortized when messages arrive oldest first. */
import { Deque } from "./deque.ts";
import type { MsgRec } from "./memory-records.ts";
import { IndexedMinHeap } from "./min-heap.ts";

/** Age order: emit time, then emit order. */
const older = (a: MsgRec, b: MsgRec): boolean =>
  a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.seq < b.seq);

/** Below this many stale entries the in-order queue is never compacted. */
const COMPACT_MIN = 1_024;

/**
 * The pending messages of one signal by age, for `oldestPendingAgeMs`. It was
 * one binary heap, whose O(log n) removal of every claimed message was the
 * largest single cost of a memory drain (a CPU profile of S3, 100 000 queued:
 * ~12 % of the drain in the comparator and sift-down). New messages arrive in
 * age order (the clock does not go back), so they join a queue in O(1); a
 * removal marks the record and drops it from the queue's front lazily, and
 * the queue is compacted in one pass when more than half of it is stale
 * (amortized O(1); a message held pending for long, behind a busy key, does
 * not pin everything enqueued after it). What arrives out of order — a retry,
 * a replay, a clock that went back — goes to an exact heap, as does a record
 * that was in the queue once (its stale entry may still be there).
 */
export class AgeIndex {
  private inOrder = new Deque<MsgRec>();
  private stale = 0;
  private readonly heap = new IndexedMinHeap<MsgRec>(older);
  private live = 0;

  get size(): number {
    return this.live;
  }

  push(m: MsgRec): void {
    this.live++;
    const back = this.inOrder.peekBack();
    if (m.ageQueued === 0 && (back === undefined || !older(m, back))) {
      m.ageQueued = 1;
      this.inOrder.pushBack(m);
    } else this.heap.push(m);
  }

  /** Removes `m` (a pending message of this signal that is in the index). */
  remove(m: MsgRec): void {
    this.live--;
    if (m.ageQueued !== 1) {
      this.heap.remove(m);
      return;
    }
    m.ageQueued = 2;
    this.stale++;
    this.trim();
    if (this.stale > COMPACT_MIN && this.stale > this.inOrder.size / 2) this.compact();
  }

  /** The oldest pending message, or undefined when none is. */
  peek(): MsgRec | undefined {
    const q = this.inOrder.peekFront();
    const h = this.heap.peek();
    if (q === undefined) return h;
    return h !== undefined && older(h, q) ? h : q;
  }

  private trim(): void {
    for (
      let f = this.inOrder.peekFront();
      f !== undefined && f.ageQueued !== 1;
      f = this.inOrder.peekFront()
    ) {
      this.inOrder.shift();
      this.stale--;
    }
  }

  private compact(): void {
    const next = new Deque<MsgRec>();
    for (const m of this.inOrder) if (m.ageQueued === 1) next.pushBack(m);
    this.inOrder = next;
    this.stale = 0;
  }
}
