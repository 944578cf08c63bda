// The live-tape half of the memory engine: one ordered tape per (signal, key), synchronous and replayable.
import type { NewTapeEntry, TapeEntry, TapeGapRead, TapeRead } from "../fanout-types.ts";
import { cloneJson } from "./clone-json.ts";

interface Tape {
  signal: string;
  key: string;
  entries: TapeEntry[];
  ids: Set<string>;
  head: number;
}

/** Tapes as plain JSON data (file driver snapshot). */
export interface TapesSnapshot {
  /** The last position given on any tape (positions are one counter for all tapes). */
  last: number;
  tapes: Array<{ signal: string; key: string; head: number; entries: TapeEntry[] }>;
  /** Per signal, the highest position pruned (absent in snapshots from before it was kept). */
  pruned?: Record<string, number>;
}

/** What one prune removed: per tape, every entry up to a position (a prefix, since a tape is in position order). */
export interface TapeCut {
  key: string;
  upTo: number;
}

const tapeKey = (signal: string, key: string): string => JSON.stringify([signal, key]);

/**
 * Positions come from one counter for all tapes. A fresh engine starts it at
 * the wall-clock microsecond of its first append, so a store whose tapes were
 * lost (the memory driver after a restart, a deleted `.oke/`) still hands out
 * positions above any a browser has seen. Positions are part of the logged
 * op (`putEntries`), so replay never reads the clock.
 */
export class MemoryTapes {
  private readonly tapes = new Map<string, Tape>();
  private last = 0;
  /** Per signal, the highest position a prune removed: a resume below it may have missed entries. */
  private readonly pruned = new Map<string, number>();

  load(s: TapesSnapshot | undefined): void {
    if (s === undefined) return;
    this.last = s.last;
    for (const [signal, through] of Object.entries(s.pruned ?? {})) this.pruned.set(signal, through);
    for (const t of s.tapes) {
      this.tapes.set(tapeKey(t.signal, t.key), {
        signal: t.signal,
        key: t.key,
        head: t.head,
        entries: t.entries.map((e) => cloneJson(e)),
        ids: new Set(t.entries.map((e) => e.id)),
      });
    }
  }

  snapshot(): TapesSnapshot {
    return {
      last: this.last,
      tapes: [...this.tapes.values()].map((t) => ({
        signal: t.signal,
        key: t.key,
        head: t.head,
        entries: t.entries.map((e) => cloneJson(e)),
      })),
      pruned: Object.fromEntries(this.pruned),
    };
  }

  private tape(signal: string, key: string): Tape {
    const k = tapeKey(signal, key);
    let t = this.tapes.get(k);
    if (t === undefined) this.tapes.set(k, (t = { signal, key, entries: [], ids: new Set(), head: 0 }));
    return t;
  }

  /** Gives the new entries their positions (ids already on their tape are skipped); returns them. */
  append(entries: readonly NewTapeEntry[], now: number): TapeEntry[] {
    if (this.last === 0) this.last = Date.now() * 1000;
    const out: TapeEntry[] = [];
    const seen = new Set<string>();
    for (const e of entries) {
      const k = tapeKey(e.signal, e.key);
      if (seen.has(`${k}\n${e.id}`) || this.tapes.get(k)?.ids.has(e.id)) continue;
      seen.add(`${k}\n${e.id}`);
      out.push({
        id: e.id,
        signal: e.signal,
        key: e.key,
        payload: cloneJson(e.payload),
        position: ++this.last,
        createdAt: now,
      });
    }
    this.put(out);
    return out.map((e) => cloneJson(e));
  }

  /** Stores entries that already have their positions (what `append` returned; log replay). */
  put(entries: readonly TapeEntry[]): void {
    for (const e of entries) {
      const t = this.tape(e.signal, e.key);
      if (t.ids.has(e.id)) continue;
      t.ids.add(e.id);
      t.entries.push(cloneJson(e));
      t.head = Math.max(t.head, e.position);
      this.last = Math.max(this.last, e.position);
    }
  }

  read(req: TapeRead): TapeEntry[] {
    const t = this.tapes.get(tapeKey(req.signal, req.key));
    if (t === undefined) return [];
    const out: TapeEntry[] = [];
    // Entries are in position order and a tape is read from near its end: scan back to the start point.
    let i = t.entries.length;
    while (i > 0 && t.entries[i - 1]!.position > req.after) i--;
    for (; i < t.entries.length && out.length < req.limit; i++) {
      const e = t.entries[i]!;
      if (req.upTo !== undefined && e.position > req.upTo) break;
      if (e.createdAt >= req.notBefore) out.push(cloneJson(e));
    }
    return out;
  }

  head(signal: string, key: string): number {
    return this.tapes.get(tapeKey(signal, key))?.head ?? 0;
  }

  /** Store.tapeGap: the signal's pruned-through when above `after`, else the tape's last expired entry above it. */
  gap(req: TapeGapRead): number {
    const pruned = this.pruned.get(req.signal) ?? 0;
    let gap = pruned > req.after ? pruned : 0;
    for (const e of this.tapes.get(tapeKey(req.signal, req.key))?.entries ?? []) {
      // In position order, and entries expire oldest first: the expired ones are a prefix.
      if (e.createdAt >= req.notBefore) break;
      if (e.position > req.after) gap = Math.max(gap, e.position);
    }
    return gap;
  }

  /** The last position given on any tape (0 before the first): the counter, which a prune never lowers. */
  lastPosition(): number {
    return this.last;
  }

  /** What pruning `signal` before `before` would remove, at most `limit` entries. */
  prunable(signal: string, before: number, limit: number): { cuts: TapeCut[]; count: number } {
    const cuts: TapeCut[] = [];
    let count = 0;
    for (const t of this.tapes.values()) {
      if (t.signal !== signal || count >= limit) continue;
      let n = 0;
      while (count < limit && n < t.entries.length && t.entries[n]!.createdAt < before) {
        n++;
        count++;
      }
      if (n > 0) cuts.push({ key: t.key, upTo: t.entries[n - 1]!.position });
    }
    return { cuts, count };
  }

  /**
   * Removes, per tape of `signal`, the entries up to a position. A tape left
   * empty is forgotten (its head reads 0 again); positions still never repeat,
   * since they come from the one counter, and `lastPosition` keeps bounding a resume.
   */
  cut(signal: string, cuts: readonly TapeCut[]): number {
    let n = 0;
    for (const c of cuts) {
      const t = this.tapes.get(tapeKey(signal, c.key));
      if (t === undefined) continue;
      while (t.entries.length > 0 && t.entries[0]!.position <= c.upTo) {
        const gone = t.entries.shift()!;
        t.ids.delete(gone.id);
        if (gone.position > (this.pruned.get(signal) ?? 0)) this.pruned.set(signal, gone.position);
        n++;
      }
      if (t.entries.length === 0) this.tapes.delete(tapeKey(signal, c.key));
    }
    return n;
  }
}
