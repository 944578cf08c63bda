/** Process-local FanoutStore (memory and file drivers): subscriptions and tapes in maps, lost on exit. */
import type {
  BroadcastSubscription,
  FanoutStore,
  LapsedSubscription,
  NewTapeEntry,
  TapeEntry,
  TapeRef,
} from "../fanout-types.ts";

interface Tape {
  entries: TapeEntry[];
  ids: Set<string>;
  head: number;
}

const pairKey = (s: BroadcastSubscription): string => JSON.stringify([s.signal, s.flow]);

/**
 * One process is the whole fleet for these drivers. Tapes are not persisted
 * (the file driver's log holds queues and runs only); positions start from the
 * wall-clock microsecond at store creation (one counter for all tapes) so they still grow across a restart, and a
 * browser resuming with an old Last-Event-ID gets the new entries, not a replay
 * of numbers it has seen.
 */
export function createMemoryFanout(): FanoutStore {
  /** pair → instance → expiresAt */
  const subs = new Map<string, { sub: BroadcastSubscription; by: Map<string, number> }>();
  const tapes = new Map<string, Tape>();
  const listeners = new Set<(tape: TapeRef | "all") => void>();
  let lastPosition = Date.now() * 1000;
  const tapeOf = (signal: string, key: string): Tape | undefined => tapes.get(JSON.stringify([signal, key]));

  return {
    async heartbeatSubscriptions(req) {
      const listed = new Set(req.subscriptions.map(pairKey));
      for (const [k, v] of subs) if (!listed.has(k)) v.by.delete(req.instance);
      for (const sub of req.subscriptions) {
        const k = pairKey(sub);
        let v = subs.get(k);
        if (!v) subs.set(k, (v = { sub: { signal: sub.signal, flow: sub.flow }, by: new Map() }));
        v.by.set(req.instance, req.expiresAt);
      }
    },
    async liveSubscriptions(now) {
      const out: BroadcastSubscription[] = [];
      for (const v of subs.values()) if ([...v.by.values()].some((at) => at > now)) out.push({ ...v.sub });
      return out;
    },
    async lapsedSubscriptions(before, limit) {
      const out: LapsedSubscription[] = [];
      for (const v of subs.values()) {
        const expiredAt = Math.max(...v.by.values());
        if (v.by.size > 0 && expiredAt <= before) out.push({ ...v.sub, expiredAt });
      }
      return out.sort((a, b) => a.expiredAt - b.expiredAt).slice(0, limit);
    },
    async forgetSubscription(sub, before) {
      const k = pairKey(sub);
      const v = subs.get(k);
      if (!v) return;
      for (const [instance, at] of v.by) if (at <= before) v.by.delete(instance);
      if (v.by.size === 0) subs.delete(k);
    },

    async appendTape(entries: NewTapeEntry[], now) {
      const out: TapeEntry[] = [];
      for (const e of entries) {
        const k = JSON.stringify([e.signal, e.key]);
        let tape = tapes.get(k);
        if (!tape) tapes.set(k, (tape = { entries: [], ids: new Set(), head: 0 }));
        if (tape.ids.has(e.id)) continue;
        tape.ids.add(e.id);
        const entry: TapeEntry = {
          id: e.id,
          signal: e.signal,
          key: e.key,
          payload: structuredClone(e.payload),
          position: (tape.head = ++lastPosition),
          createdAt: now,
        };
        tape.entries.push(entry);
        out.push(entry);
      }
      const touched = new Set(out.map((e) => JSON.stringify([e.signal, e.key])));
      for (const k of touched) {
        const [signal, key] = JSON.parse(k) as [string, string];
        for (const l of [...listeners]) {
          try {
            l({ signal, key });
          } catch (err) {
            // A broken listener must not fail a committed append; surface it instead.
            queueMicrotask(() => {
              throw err;
            });
          }
        }
      }
      return out.map((e) => structuredClone(e));
    },
    async readTape(req) {
      const tape = tapeOf(req.signal, req.key);
      if (!tape) return [];
      const out: TapeEntry[] = [];
      // Entries are in position order: binary search would do, a tape is read from near its end.
      let i = tape.entries.length;
      while (i > 0 && tape.entries[i - 1]!.position > req.after) i--;
      for (; i < tape.entries.length && out.length < req.limit; i++) {
        const e = tape.entries[i]!;
        if (req.upTo !== undefined && e.position > req.upTo) break;
        if (e.createdAt >= req.notBefore) out.push(structuredClone(e));
      }
      return out;
    },
    async tapeHead(signal, key) {
      return tapeOf(signal, key)?.head ?? 0;
    },
    async pruneTape(signal, before, limit) {
      let n = 0;
      for (const tape of tapes.values()) {
        if (tape.entries[0]?.signal !== signal) continue;
        while (n < limit && tape.entries.length > 0 && tape.entries[0].createdAt < before) {
          tape.ids.delete(tape.entries.shift()!.id);
          n++;
        }
      }
      return n;
    },
    subscribeTapes(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}
