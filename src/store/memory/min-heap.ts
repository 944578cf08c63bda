/** IndexedMinHeap: a binary min-heap whose items know their position. */
/**
 * A binary min-heap whose items remember their own position (`heapIndex`), so
 * an item can be removed or re-keyed in O(log n) without a search. That keeps
 * the heaps exact: a settled message leaves its lease heap at once instead of
 * lingering as a stale entry until its deadline passes.
 *
 * An item may sit in at most one IndexedMinHeap at a time (one `heapIndex`
 * slot); callers rely on that: a message is pending (age heap), inflight
 * (lease heap) or delivered (prune heap), never two at once.
 */
export interface HeapSlot {
  /** Position in the heap holding this item, or -1 when in none. */
  heapIndex: number;
}

export class IndexedMinHeap<T extends HeapSlot> {
  private readonly items: T[] = [];

  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  has(item: T): boolean {
    return item.heapIndex >= 0 && this.items[item.heapIndex] === item;
  }

  push(item: T): void {
    item.heapIndex = this.items.length;
    this.items.push(item);
    this.up(item.heapIndex);
  }

  pop(): T | undefined {
    const top = this.items[0];
    if (top !== undefined) this.removeAt(0);
    return top;
  }

  /** Removes `item` if it is in this heap; returns whether it was. */
  remove(item: T): boolean {
    if (!this.has(item)) return false;
    this.removeAt(item.heapIndex);
    return true;
  }

  /** Restores heap order after `item`'s key changed (either direction). */
  update(item: T): void {
    if (!this.has(item)) return;
    this.down(this.up(item.heapIndex));
  }

  /** Items in heap order (not sorted); for snapshots and tests. */
  values(): readonly T[] {
    return this.items;
  }

  clear(): void {
    for (const item of this.items) item.heapIndex = -1;
    this.items.length = 0;
  }

  private removeAt(i: number): void {
    const items = this.items;
    const gone = items[i]!;
    const last = items.pop()!;
    gone.heapIndex = -1;
    if (i < items.length) {
      items[i] = last;
      last.heapIndex = i;
      this.down(this.up(i));
    }
  }

  /** Sifts up from `i`; returns the final position. */
  private up(i: number): number {
    const items = this.items;
    const item = items[i]!;
    while (i > 0) {
      const parentAt = (i - 1) >> 1;
      const parent = items[parentAt]!;
      if (!this.less(item, parent)) break;
      items[i] = parent;
      parent.heapIndex = i;
      i = parentAt;
    }
    items[i] = item;
    item.heapIndex = i;
    return i;
  }

  private down(i: number): void {
    const items = this.items;
    const n = items.length;
    const item = items[i]!;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && this.less(items[right]!, items[left]!) ? right : left;
      const c = items[child]!;
      if (!this.less(c, item)) break;
      items[i] = c;
      c.heapIndex = i;
      i = child;
    }
    items[i] = item;
    item.heapIndex = i;
  }
}
