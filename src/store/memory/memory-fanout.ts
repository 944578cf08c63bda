/** Process-local broadcast subscriptions (memory and file drivers): who runs which flow, in a map, lost on exit. */
import type { BroadcastSubscription, FanoutStore, LapsedSubscription } from "../fanout-types.ts";

/** The subscription half of the FanoutStore; tapes live in the engine (memory-tapes.ts). */
export type SubscriptionStore = Pick<
  FanoutStore,
  "heartbeatSubscriptions" | "liveSubscriptions" | "lapsedSubscriptions" | "forgetSubscription"
>;

const pairKey = (s: BroadcastSubscription): string => JSON.stringify([s.signal, s.flow]);

/**
 * One process is the whole fleet for these drivers, and a subscription is a
 * fact about running processes: nothing to keep across a restart (a restarted
 * instance announces itself again on its first heartbeat).
 */
export function createMemorySubscriptions(): SubscriptionStore {
  /** pair → instance → expiresAt */
  const subs = new Map<string, { sub: BroadcastSubscription; by: Map<string, number> }>();

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
        let expiredAt = -Infinity;
        for (const at of v.by.values()) if (at > expiredAt) expiredAt = at;
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
  };
}
