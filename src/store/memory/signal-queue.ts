/** The live structures of one signal in the memory engine. */
import { AgeIndex } from "./age-index.ts";
import { Deque } from "./deque.ts";
import { KeyFifo } from "./key-fifo.ts";
import type { MsgRec } from "./memory-records.ts";
import { IndexedMinHeap } from "./min-heap.ts";

/**
 * The live structures of one signal. Every pending message sits in `ages` and
 * in exactly one ready structure (the unkeyed deque or its key's lane); every
 * inflight message sits in `leases`; dead ones in `dead`. Counts therefore
 * come from sizes, and no operation walks the messages.
 */
export class SignalQueue {
  /** Unkeyed pending messages: the competing pool. Retries go to the front. */
  readonly unkeyed = new Deque<MsgRec>();
  readonly keys = new KeyFifo<MsgRec>();
  /** Inflight messages by lease expiry: claim pops the expired ones first (lazy reclaim). */
  readonly leases = new IndexedMinHeap<MsgRec>((a, b) => a.leaseExpiresAt! < b.leaseExpiresAt!);
  /** Pending messages by age, for `oldestPendingAgeMs`. */
  readonly ages = new AgeIndex();
  /** Dead letters by id. */
  readonly dead = new Map<string, MsgRec>();
  delivered = 0;
  /** Of the delivered, those with a failure recorded (a failed broadcast copy, a once message retried). */
  deliveredFailed = 0;

  constructor(readonly signal: string) {}

  /**
   * Files a pending message where the next claim finds it. `retry` puts it
   * first: failed attempts requeue immediately, ahead of their key's successors.
   */
  addPending(m: MsgRec, retry: boolean): void {
    this.ages.push(m);
    if (m.key === null) {
      if (retry) this.unkeyed.pushFront(m);
      else this.unkeyed.pushBack(m);
    } else if (retry) this.keys.retry(m.key, m);
    else this.keys.addPending(m.key, m);
  }

  /**
   * Removes and returns the next claimable pending message. The unkeyed pool
   * and the ready keys are merged by emit order of their heads, so old work of
   * either kind is not starved by the other.
   */
  takeReady(): MsgRec | undefined {
    const u = this.unkeyed.peekFront();
    const m = u !== undefined && u.seq < this.keys.nextSeq() ? this.unkeyed.shift() : this.keys.take();
    if (m !== undefined) this.ages.remove(m);
    return m;
  }

  /** Takes the given pending messages out of every pending structure (an operator's discard). */
  removePending(ms: readonly MsgRec[]): void {
    const gone = new Set(ms);
    const keys = new Set<string>();
    let unkeyed = false;
    for (const m of ms) {
      this.ages.remove(m);
      if (m.key === null) unkeyed = true;
      else keys.add(m.key);
    }
    if (unkeyed) this.unkeyed.removeWhere((m) => gone.has(m));
    for (const k of keys) this.keys.removePending(k, (m) => gone.has(m));
  }

  /** Dead letters oldest first (by emit time, then emit order). */
  sortedDead(): MsgRec[] {
    return [...this.dead.values()].sort((a, b) => a.createdAt - b.createdAt || a.seq - b.seq);
  }
}
