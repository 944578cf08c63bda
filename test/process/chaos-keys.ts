// Numbering of the chaos test's messages, shared by the test and its emitter processes.

/**
 * Message n belongs to emitter slot n % slots; every other message of a slot is keyed, 16 keys a slot, so
 * each key has one emitter and its acknowledgement order is the order of n.
 */
export function chaosKey(n: number, slots: number): string | null {
  const i = Math.floor(n / slots);
  return i % 2 === 0 ? `k${n % slots}-${Math.floor(i / 2) % 16}` : null;
}

/** mulberry32: a small seeded generator, so a failing run can be replayed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
