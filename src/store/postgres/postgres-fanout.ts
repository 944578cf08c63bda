/** The postgres FanoutStore: broadcast subscriber rows, tapes in tables, a LISTEN channel for tape appends. */
import type {
  BroadcastSubscription,
  FanoutStore,
  LapsedSubscription,
  NewTapeEntry,
  TapeEntry,
  TapeRef,
} from "../fanout-types.ts";
import type { StoreEvent } from "../types.ts";
import { type PgContext, type PgLogger, q } from "./postgres-context.ts";
import { fromJson, jsonParam } from "./postgres-rows.ts";
import { createWakeSource, encodeWake, type WakeSource } from "./postgres-wake.ts";

export interface PgFanoutOptions {
  connectionString: string;
  schema: string;
  pollIntervalMs: number;
  /** How long one connect of the LISTEN connection may take, in ms; 0 = unbounded. */
  connectTimeoutMs?: number;
  logger: PgLogger;
}

interface TapeRow {
  signal: string;
  key: string;
  position: number;
  id: string;
  payload: unknown;
  created_at: number;
}

const toEntry = (r: TapeRow): TapeEntry => ({
  id: r.id,
  signal: r.signal,
  key: r.key,
  payload: fromJson(r.payload),
  position: r.position,
  createdAt: r.created_at,
});

/** A tape's name in a NOTIFY payload (the wake payload's `e` list carries them). */
const tapeName = (signal: string, key: string): string => JSON.stringify([signal, key]);

/**
 * Appends to one tape: lock its head row (insert or update), take the next
 * position from the sequence while holding it, insert the entry. The row lock
 * lasts until commit, so positions on a tape grow in commit order — a reader
 * that saw position p never later finds an entry below p appear.
 *
 * One sequence value per entry. The VALUES row is built before ON CONFLICT
 * looks for the row, so a nextval there would be spent on every append that
 * finds it (and a value taken before the lock would break the order): a new
 * row gets the placeholder 0 instead, and its position is taken in `p` once
 * the uncommitted row holds off the tape's other appends. The head column is
 * therefore 0 after a tape's first append; tapeHead reads the entries instead.
 */
const appendSql = (s: string): string => `
  WITH h AS (
    INSERT INTO ${s}.tape_heads (signal, key, head) VALUES ($1, $2, 0)
    ON CONFLICT (signal, key) DO UPDATE SET head = nextval('${s}.tape_positions')
    RETURNING head
  ), p AS (
    SELECT CASE WHEN h.head = 0 THEN nextval('${s}.tape_positions') ELSE h.head END AS position FROM h
  )
  INSERT INTO ${s}.tape_entries (signal, key, position, id, payload, created_at)
  SELECT $1, $2, p.position, $3, $4, $5 FROM p
  ON CONFLICT (id) DO NOTHING
  RETURNING signal, key, position, id, payload, created_at`;

export interface PgFanout {
  store: FanoutStore;
  close(): Promise<void>;
}

export function createPostgresFanout(ctx: PgContext, o: PgFanoutOptions): PgFanout {
  const { s } = ctx;
  // "okengine_" + schema (≤ 48) + "_live" stays within the 63 bytes of a channel name.
  const channel = `okengine_${o.schema}_live`;
  const listeners = new Set<(tape: TapeRef | "all") => void>();
  let source: WakeSource | undefined;
  let closed = false;
  /** Tapes every listener should re-read: `undefined` = all of them (a poll tick or reconnect). */
  const tell = (tapes: TapeRef[] | undefined): void => {
    for (const l of [...listeners]) {
      try {
        if (tapes === undefined) l("all");
        else for (const t of tapes) l(t);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  };
  const onEvents = (events: StoreEvent[]): void => {
    const tapes: TapeRef[] = [];
    for (const e of events) {
      if (e.kind === "wake") return tell(undefined);
      try {
        const [signal, key] = JSON.parse(e.signal) as [string, string];
        tapes.push({ signal, key });
      } catch {
        return tell(undefined);
      }
    }
    tell(tapes);
  };
  // The LISTEN connection is opened by the first subscriber: an app with no live reader holds none.
  // Once created the source stays until close(): it retries a connect that failed (even the first)
  // or a connection that was lost, polls meanwhile and logs each outage, so no reader ever waits
  // for a later subscriber to bring it back.
  const startListening = (): void => {
    if (closed || source) return;
    source = createWakeSource({
      connectionString: o.connectionString,
      channel,
      origin: ctx.origin,
      applicationName: `okengine-live:${o.schema}`,
      listen: ctx.notify,
      pollIntervalMs: o.pollIntervalMs,
      connectTimeoutMs: o.connectTimeoutMs ?? 0,
      logger: o.logger,
      onEvents,
      name: "LISTEN for live tapes",
    });
    // Never rejects: a failed connect is the source's to log and retry.
    void source.start();
  };

  const store: FanoutStore = {
    async heartbeatSubscriptions(req) {
      const signals = req.subscriptions.map((x) => x.signal);
      const flows = req.subscriptions.map((x) => x.flow);
      // `stale`: other instances' rows of the pairs this one runs that have expired. The janitor forgets
      // rows only of a pair whose every row lapsed, and a pair some instance always runs (through
      // rolling deploys) never is: without this, each restart left a row behind for good. Such a pair
      // stays live through this instance's own row, so no lapse is hidden from the janitor.
      await q(
        ctx.pool,
        `WITH gone AS (
           DELETE FROM ${s}.broadcast_subscribers
           WHERE instance = $1 AND (signal, flow) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
         ), stale AS (
           DELETE FROM ${s}.broadcast_subscribers
           WHERE instance <> $1 AND expires_at <= $5
             AND (signal, flow) IN (SELECT * FROM unnest($2::text[], $3::text[]))
         )
         INSERT INTO ${s}.broadcast_subscribers (signal, flow, instance, expires_at)
         SELECT u.signal, u.flow, $1, $4 FROM unnest($2::text[], $3::text[]) AS u(signal, flow)
         ON CONFLICT (signal, flow, instance) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
        [req.instance, signals, flows, req.expiresAt, req.now],
      );
    },
    async liveSubscriptions(now) {
      const { rows } = await q<BroadcastSubscription>(
        ctx.pool,
        `SELECT DISTINCT signal, flow FROM ${s}.broadcast_subscribers WHERE expires_at > $1`,
        [now],
      );
      return rows.map((r) => ({ signal: r.signal, flow: r.flow }));
    },
    async lapsedSubscriptions(before, limit) {
      const { rows } = await q<{ signal: string; flow: string; expired_at: number }>(
        ctx.pool,
        `SELECT signal, flow, max(expires_at) AS expired_at FROM ${s}.broadcast_subscribers
         GROUP BY signal, flow HAVING max(expires_at) <= $1 ORDER BY 3 LIMIT $2`,
        [before, limit],
      );
      return rows.map((r): LapsedSubscription => ({
        signal: r.signal,
        flow: r.flow,
        expiredAt: r.expired_at,
      }));
    },
    async forgetSubscription(sub, before) {
      await q(
        ctx.pool,
        `DELETE FROM ${s}.broadcast_subscribers WHERE signal = $1 AND flow = $2 AND expires_at <= $3`,
        [sub.signal, sub.flow, before],
      );
    },

    async appendTape(entries: NewTapeEntry[], now) {
      if (entries.length === 0) return [];
      const out: TapeEntry[] = [];
      const client = await ctx.pool.connect();
      try {
        await client.query("BEGIN");
        for (const e of entries) {
          const { rows } = await q<TapeRow>(client, appendSql(s), [
            e.signal,
            e.key,
            e.id,
            jsonParam(e.payload),
            now,
          ]);
          for (const row of rows) out.push(toEntry(row));
        }
        const names = [...new Set(out.map((e) => tapeName(e.signal, e.key)))];
        if (ctx.notify && names.length > 0)
          await client.query("SELECT pg_notify($1, $2)", [channel, encodeWake({ o: ctx.origin, e: names })]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
      const touched = new Map(out.map((e) => [tapeName(e.signal, e.key), { signal: e.signal, key: e.key }]));
      tell([...touched.values()]);
      return out;
    },
    async readTape(req) {
      const { rows } = await q<TapeRow>(
        ctx.pool,
        `SELECT signal, key, position, id, payload, created_at FROM ${s}.tape_entries
         WHERE signal = $1 AND key = $2 AND position > $3 AND ($4::bigint IS NULL OR position <= $4)
           AND created_at >= $5
         ORDER BY position LIMIT $6`,
        [req.signal, req.key, req.after, req.upTo ?? null, req.notBefore, req.limit],
      );
      return rows.map(toEntry);
    },
    async tapeHead(signal, key) {
      // The entries, not tape_heads.head (0 after a tape's first append, see appendSql): the primary
      // key's last row for the tape, one index probe.
      const { rows } = await q<{ head: number }>(
        ctx.pool,
        `SELECT position AS head FROM ${s}.tape_entries WHERE signal = $1 AND key = $2
         ORDER BY position DESC LIMIT 1`,
        [signal, key],
      );
      return rows[0]?.head ?? 0;
    },
    async lastTapePosition() {
      // The sequence itself: every position given, committed or not, and a prune never lowers it.
      // Before the first nextval last_value is the start value (1) with is_called false.
      const { rows } = await q<{ last: number }>(
        ctx.pool,
        `SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS last FROM ${s}.tape_positions`,
        [],
      );
      return rows[0]?.last ?? 0;
    },
    async tapeGap(req) {
      // Two index probes: the signal's row of tape_pruned, and the tape's oldest entries through its
      // primary key (expired ones are its oldest). GREATEST ignores NULLs; 0 when neither has one.
      const { rows } = await q<{ gap: number }>(
        ctx.pool,
        `SELECT COALESCE(GREATEST(
           (SELECT through FROM ${s}.tape_pruned WHERE signal = $1 AND through > $3),
           (SELECT max(position) FROM ${s}.tape_entries
             WHERE signal = $1 AND key = $2 AND position > $3 AND created_at < $4)), 0) AS gap`,
        [req.signal, req.key, req.after, req.notBefore],
      );
      return rows[0]?.gap ?? 0;
    },
    async pruneTape(signal, before, limit) {
      // One batch per call (the caller loops): a big backlog never holds one long DELETE. The same
      // statement raises the signal's pruned-through, so no prune commits without it.
      const { rows } = await q<{ key: string }>(
        ctx.pool,
        `WITH gone AS (
           DELETE FROM ${s}.tape_entries WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM ${s}.tape_entries WHERE signal = $1 AND created_at < $2 LIMIT $3))
           RETURNING key, position),
         through AS (
           INSERT INTO ${s}.tape_pruned (signal, through)
           SELECT $1, max(position) FROM gone HAVING count(*) > 0
           ON CONFLICT (signal) DO UPDATE SET through = GREATEST(${s}.tape_pruned.through, excluded.through))
         SELECT key FROM gone`,
        [signal, before, limit],
      );
      // Heads of the tapes this emptied go too (a second statement: the first one's snapshot still
      // sees the rows it deleted). Positions come from a sequence, so a later append never reuses one.
      const keys = [...new Set(rows.map((r) => r.key))];
      if (keys.length > 0)
        await q(
          ctx.pool,
          `DELETE FROM ${s}.tape_heads h WHERE h.signal = $1 AND h.key = ANY($2::text[])
             AND NOT EXISTS (SELECT 1 FROM ${s}.tape_entries e WHERE e.signal = h.signal AND e.key = h.key)`,
          [signal, keys],
        );
      return rows.length;
    },
    subscribeTapes(listener) {
      listeners.add(listener);
      startListening();
      return () => {
        listeners.delete(listener);
      };
    },
  };

  return {
    store,
    async close() {
      closed = true;
      await source?.close();
    },
  };
}
