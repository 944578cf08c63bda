/** Deque: a ring-buffer double-ended queue. */
/**
 * A ring-buffer double-ended queue: O(1) push/shift at both ends. Array#shift
 * is O(n) once an array leaves V8's fast path, which a 200k-message queue does.
 */
export class Deque<T> {
  private buf: (T | undefined)[] = new Array<T | undefined>(16);
  private head = 0;
  private len = 0;

  get size(): number {
    return this.len;
  }

  /** The i-th item from the front. */
  at(i: number): T | undefined {
    if (i < 0 || i >= this.len) return undefined;
    return this.buf[(this.head + i) & (this.buf.length - 1)];
  }

  peekFront(): T | undefined {
    return this.len === 0 ? undefined : this.buf[this.head];
  }

  peekBack(): T | undefined {
    return this.len === 0 ? undefined : this.buf[(this.head + this.len - 1) & (this.buf.length - 1)];
  }

  pushBack(item: T): void {
    if (this.len === this.buf.length) this.grow();
    this.buf[(this.head + this.len) & (this.buf.length - 1)] = item;
    this.len++;
  }

  pushFront(item: T): void {
    if (this.len === this.buf.length) this.grow();
    this.head = (this.head - 1) & (this.buf.length - 1);
    this.buf[this.head] = item;
    this.len++;
  }

  shift(): T | undefined {
    if (this.len === 0) return undefined;
    const item = this.buf[this.head];
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) & (this.buf.length - 1);
    this.len--;
    return item;
  }

  /** Inserts before position `i` (0 = front, size = back). O(n): for rare middle inserts. */
  insertAt(i: number, item: T): void {
    if (i <= 0) return this.pushFront(item);
    if (i >= this.len) return this.pushBack(item);
    this.pushBack(item);
    const mask = this.buf.length - 1;
    for (let j = this.len - 1; j > i; j--) {
      this.buf[(this.head + j) & mask] = this.buf[(this.head + j - 1) & mask];
    }
    this.buf[(this.head + i) & mask] = item;
  }

  /** Drops every item `drop` picks, keeping the others' order: O(n), for rare operator calls only. */
  removeWhere(drop: (item: T) => boolean): number {
    const kept: T[] = [];
    for (const item of this) if (!drop(item)) kept.push(item);
    const removed = this.len - kept.length;
    if (removed === 0) return 0;
    this.buf.fill(undefined);
    this.head = 0;
    this.len = 0;
    for (const item of kept) this.pushBack(item);
    return removed;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.len; i++) yield this.buf[(this.head + i) & (this.buf.length - 1)]!;
  }

  private grow(): void {
    const next = new Array<T | undefined>(this.buf.length * 2);
    for (let i = 0; i < this.len; i++) next[i] = this.buf[(this.head + i) & (this.buf.length - 1)];
    this.buf = next;
    this.head = 0;
  }
}
