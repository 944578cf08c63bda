// Seeded numbering shared by the chaos tests and their child processes: message keys, naps, a PRNG.

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

/** The nap of durable chaos run i: 1 to 7 s, from the seed. */
export function napMs(i: number, seed: number): number {
  return 1_000 + Math.floor(seededRandom(seed * 7_919 + i)() * 6_000);
}
