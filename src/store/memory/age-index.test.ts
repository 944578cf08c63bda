// AgeIndex: the oldest pending message stays exact through in-order and out-of-order arrivals, removals, re-adds and compaction (seeded model test).
import { describe, expect, it } from "vitest";
import { AgeIndex } from "./age-index.ts";
import { newMsgRec, type MsgRec } from "./memory-records.ts";

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

const rec = (seq: number, createdAt: number): MsgRec =>
  newMsgRec({ id: `m${seq}`, signal: "s", key: null, payload: null, parentRunId: null }, createdAt, seq);

/** The model: the oldest of a plain set, by (createdAt, seq). */
function oldest(set: Set<MsgRec>): MsgRec | undefined {
  let best: MsgRec | undefined;
  for (const m of set)
    if (
      best === undefined ||
      m.createdAt < best.createdAt ||
      (m.createdAt === best.createdAt && m.seq < best.seq)
    )
      best = m;
  return best;
}

describe("AgeIndex", () => {
  it("gives the oldest first when messages arrive in age order and leave from anywhere", () => {
    const idx = new AgeIndex();
    const ms = Array.from({ length: 10 }, (_, i) => rec(i + 1, 100 + i));
    for (const m of ms) idx.push(m);
    expect(idx.peek()).toBe(ms[0]);
    idx.remove(ms[3]!);
    idx.remove(ms[0]!);
    expect(idx.peek()).toBe(ms[1]);
    expect(idx.size).toBe(8);
    idx.remove(ms[1]!);
    idx.remove(ms[2]!);
    // ms[3] left earlier: its stale entry is skipped.
    expect(idx.peek()).toBe(ms[4]);
  });

  it("takes a retry older than everything queued, and a record re-added after it left", () => {
    const idx = new AgeIndex();
    const a = rec(1, 100);
    const b = rec(2, 200);
    idx.push(a);
    idx.push(b);
    idx.remove(a);
    expect(idx.peek()).toBe(b);
    idx.push(a); // a retry: back to pending with its old emit time
    expect(idx.peek()).toBe(a);
    expect(idx.size).toBe(2);
    idx.remove(a);
    expect(idx.peek()).toBe(b);
    idx.remove(b);
    expect(idx.peek()).toBeUndefined();
    expect(idx.size).toBe(0);
  });

  it("stays exact while one old message is held and thousands pass it (the queue compacts)", () => {
    const idx = new AgeIndex();
    const held = rec(1, 100);
    idx.push(held);
    let seq = 1;
    for (let round = 0; round < 5; round++) {
      const batch = Array.from({ length: 3_000 }, () => rec(++seq, 100 + seq));
      for (const m of batch) idx.push(m);
      for (const m of batch) idx.remove(m);
      expect(idx.peek()).toBe(held);
      expect(idx.size).toBe(1);
    }
    const last = rec(++seq, 100 + seq);
    idx.push(last);
    idx.remove(held);
    expect(idx.peek()).toBe(last);
  });

  it("matches a model over 20 000 random operations, through compactions", () => {
    for (const seed of [1, 2, 3]) {
      const rand = rng(seed);
      const idx = new AgeIndex();
      const live = new Set<MsgRec>();
      const left: MsgRec[] = [];
      let seq = 0;
      let clock = 1_000;
      for (let op = 0; op < 20_000; op++) {
        const r = rand();
        if (r < 0.45) {
          // Mostly in order; now and then the clock goes back.
          clock += rand() < 0.05 ? -Math.floor(rand() * 50) : Math.floor(rand() * 3);
          const m = rec(++seq, clock);
          idx.push(m);
          live.add(m);
        } else if (r < 0.9 && live.size > 0) {
          // The oldest most of the time (a drain), otherwise any (a keyed message, a claim past a busy key).
          const all = [...live];
          const m = rand() < 0.6 ? oldest(live)! : all[Math.floor(rand() * all.length)]!;
          idx.remove(m);
          live.delete(m);
          left.push(m);
        } else if (left.length > 0) {
          // A retry or a replay: a record that left comes back with its old emit time.
          const m = left.splice(Math.floor(rand() * left.length), 1)[0]!;
          idx.push(m);
          live.add(m);
        }
        expect(idx.size).toBe(live.size);
        expect(idx.peek()).toBe(oldest(live));
      }
    }
  });
});
