// IndexedMinHeap: pop order, removal and re-keying by position (seeded model test).
import { describe, expect, it } from "vitest";
import { IndexedMinHeap } from "./min-heap.ts";

interface Item {
  heapIndex: number;
  k: number;
  id: number;
}
const item = (id: number, k: number): Item => ({ heapIndex: -1, k, id });
const heap = (): IndexedMinHeap<Item> =>
  new IndexedMinHeap<Item>((a, b) => a.k < b.k || (a.k === b.k && a.id < b.id));

/** Deterministic pseudo-random numbers (mulberry32) so failures reproduce. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("IndexedMinHeap", () => {
  it("pops in key order", () => {
    const h = heap();
    for (const [id, k] of [
      [1, 5],
      [2, 1],
      [3, 4],
      [4, 1],
      [5, 9],
      [6, 0],
    ] as const)
      h.push(item(id, k));
    const out: number[] = [];
    for (let x = h.pop(); x !== undefined; x = h.pop()) out.push(x.id);
    expect(out).toEqual([6, 2, 4, 3, 1, 5]);
    expect(h.size).toBe(0);
    expect(h.peek()).toBeUndefined();
  });

  it("removes and re-keys arbitrary items, keeping positions exact (randomised against a sorted model)", () => {
    const rand = rng(42);
    const h = heap();
    const live = new Set<Item>();
    let nextId = 0;
    for (let step = 0; step < 3_000; step++) {
      const r = rand();
      const pick = (): Item | undefined => [...live][Math.floor(rand() * live.size)];
      if (r < 0.4 || live.size === 0) {
        const x = item(nextId++, Math.floor(rand() * 100));
        h.push(x);
        live.add(x);
      } else if (r < 0.6) {
        const x = pick()!;
        expect(h.remove(x)).toBe(true);
        expect(h.remove(x)).toBe(false);
        expect(x.heapIndex).toBe(-1);
        live.delete(x);
      } else if (r < 0.8) {
        const x = pick()!;
        x.k = Math.floor(rand() * 100);
        h.update(x);
      } else {
        const min = [...live].sort((a, b) => a.k - b.k || a.id - b.id)[0]!;
        expect(h.pop()).toBe(min);
        live.delete(min);
      }
      expect(h.size).toBe(live.size);
      if (step % 25 === 0) for (const x of live) expect(h.values()[x.heapIndex]).toBe(x);
    }
    const drained: Item[] = [];
    for (let x = h.pop(); x !== undefined; x = h.pop()) drained.push(x);
    expect(drained).toEqual([...live].sort((a, b) => a.k - b.k || a.id - b.id));
  });

  it("ignores items it does not hold", () => {
    const a = heap();
    const b = heap();
    const x = item(1, 1);
    b.push(item(0, 0));
    a.push(x);
    expect(b.remove(x)).toBe(false);
    expect(b.has(x)).toBe(false);
    b.update(x);
    expect(a.peek()).toBe(x);
  });
});
