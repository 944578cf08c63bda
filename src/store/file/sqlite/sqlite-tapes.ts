/** The file engine's live tapes: entries with positions from one counter for all tapes, kept in meta. */
import type { NewTapeEntry, TapeEntry, TapeGapRead, TapeRead } from "../../fanout-types.ts";
import type { TapeCut } from "../../memory/memory-tapes.ts";
import { enc, dec, toTape, type TapeRow } from "./sqlite-rows.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";

export class SqliteTapes {
  private tapeLast: number;

  constructor(private readonly b: SqliteBatch) {
    this.tapeLast = this.b.get<{ v: number }>("SELECT v FROM meta WHERE k = 'tape_last'")?.v ?? 0;
  }

  appendTape(entries: readonly NewTapeEntry[], now: number): TapeEntry[] {
    this.b.check();
    const out: TapeEntry[] = [];
    const seen = new Set<string>();
    let last = this.tapeLast === 0 ? Date.now() * 1000 : this.tapeLast;
    for (const e of entries) {
      const k = JSON.stringify([e.signal, e.key, e.id]);
      if (
        seen.has(k) ||
        this.b.get(
          "SELECT 1 FROM tape_entries WHERE signal = ? AND key = ? AND id = ?",
          e.signal,
          e.key,
          e.id,
        ) !== undefined
      )
        continue;
      seen.add(k);
      out.push({
        id: e.id,
        signal: e.signal,
        key: e.key,
        payload: dec(enc(e.payload)),
        position: ++last,
        createdAt: now,
      });
    }
    if (out.length === 0) return out;
    this.b.write(() => {
      for (const t of out)
        this.b.run(
          "INSERT INTO tape_entries (signal, key, position, id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
          t.signal,
          t.key,
          t.position,
          t.id,
          enc(t.payload),
          t.createdAt,
        );
      this.b.run(
        "INSERT INTO meta (k, v) VALUES ('tape_last', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
        last,
      );
    });
    this.tapeLast = last;
    return out;
  }

  readTape(req: TapeRead): TapeEntry[] {
    this.b.check();
    return this.b
      .all<TapeRow>(
        `SELECT * FROM tape_entries WHERE signal = ? AND key = ? AND position > ? AND position <= ?
         AND created_at >= ? ORDER BY position LIMIT ?`,
        req.signal,
        req.key,
        req.after,
        req.upTo ?? Number.MAX_SAFE_INTEGER,
        req.notBefore,
        Math.max(0, req.limit),
      )
      .map(toTape);
  }

  tapeHead(signal: string, key: string): number {
    this.b.check();
    return (
      this.b.get<{ p: number | null }>(
        "SELECT max(position) AS p FROM tape_entries WHERE signal = ? AND key = ?",
        signal,
        key,
      )?.p ?? 0
    );
  }

  /**
   * Store.tapeGap. The signal's pruned-through lives in meta (`tape_pruned:<signal>`), one row per
   * signal ever pruned; the expired entries are the tape's oldest, read through its primary key.
   */
  tapeGap(req: TapeGapRead): number {
    this.b.check();
    const pruned = this.b.get<{ v: number }>("SELECT v FROM meta WHERE k = ?", prunedKey(req.signal))?.v ?? 0;
    const expired =
      this.b.get<{ p: number | null }>(
        `SELECT max(position) AS p FROM tape_entries
         WHERE signal = ? AND key = ? AND position > ? AND created_at < ?`,
        req.signal,
        req.key,
        req.after,
        req.notBefore,
      )?.p ?? 0;
    return Math.max(pruned > req.after ? pruned : 0, expired);
  }

  /** The last position given on any tape (0 before the first): meta's counter, which a prune never lowers. */
  lastTapePosition(): number {
    this.b.check();
    return this.tapeLast;
  }

  prunableTape(signal: string, before: number, limit: number): TapeCut[] {
    this.b.check();
    const cuts: TapeCut[] = [];
    let count = 0;
    for (const { key } of this.b.all<{ key: string }>(
      "SELECT DISTINCT key FROM tape_entries WHERE signal = ? ORDER BY key",
      signal,
    )) {
      if (count >= limit) break;
      let upTo: number | undefined;
      for (const e of this.b.all<{ position: number; created_at: number }>(
        "SELECT position, created_at FROM tape_entries WHERE signal = ? AND key = ? ORDER BY position LIMIT ?",
        signal,
        key,
        limit - count,
      )) {
        if (e.created_at >= before) break;
        upTo = e.position;
        count++;
      }
      if (upTo !== undefined) cuts.push({ key, upTo });
    }
    return cuts;
  }

  cutTape(signal: string, cuts: readonly TapeCut[]): number {
    this.b.check();
    if (cuts.length === 0) return 0;
    return this.b.write(() => {
      let n = 0;
      for (const c of cuts)
        n += this.b.run(
          "DELETE FROM tape_entries WHERE signal = ? AND key = ? AND position <= ?",
          signal,
          c.key,
          c.upTo,
        );
      // A cut removes a tape's prefix up to c.upTo, which was on the tape: the highest is pruned-through.
      this.b.run(
        "INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = max(v, excluded.v)",
        prunedKey(signal),
        Math.max(...cuts.map((c) => c.upTo)),
      );
      return n;
    });
  }
}

/** The meta row holding a signal's pruned-through position. */
const prunedKey = (signal: string): string => `tape_pruned:${signal}`;
