/** Cross-process wake-ups on postgres over LISTEN/NOTIFY. */
import pg from "pg";
import type { StoreEvent } from "../types.ts";

/** The logger methods the listener uses (PgLogger fits; declared here so this file needs no import of the context). */
interface PgLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * Cross-process wake-ups. NOTIFY payloads are small JSON objects:
 * `{ o?: origin, e?: enqueued signals, s?: settled signals, w?: 1 }`. A
 * process ignores its own non-transactional notifications (it already told
 * its subscribers right after the commit); `o` is absent when the NOTIFY rode
 * on a caller's transaction, so the LISTEN echo is how this process learns of
 * that commit.
 */
export interface WakePayload {
  o?: string;
  e?: string[];
  s?: string[];
  w?: 1;
}

/** NOTIFY payloads must stay under 8000 bytes; past this we say "wake". */
const MAX_PAYLOAD = 7000;

export function encodeWake(p: WakePayload): string {
  const text = JSON.stringify(p);
  return text.length <= MAX_PAYLOAD
    ? text
    : JSON.stringify({ ...(p.o === undefined ? {} : { o: p.o }), w: 1 });
}

export function decodeWake(text: string | undefined): { origin: string | undefined; events: StoreEvent[] } {
  let p: WakePayload;
  try {
    p = JSON.parse(text ?? "") as WakePayload;
  } catch {
    return { origin: undefined, events: [{ kind: "wake" }] };
  }
  const events: StoreEvent[] = [];
  for (const signal of p.e ?? []) events.push({ kind: "enqueued", signal });
  for (const signal of p.s ?? []) events.push({ kind: "settled", signal });
  if (p.w === 1 || events.length === 0) events.push({ kind: "wake" });
  return { origin: p.o, events };
}

export interface WakeSourceOptions {
  connectionString: string;
  channel: string;
  origin: string;
  /** pg_stat_activity name of the LISTEN connection. */
  applicationName: string;
  /** false: poll-only mode, no LISTEN connection at all. */
  listen: boolean;
  pollIntervalMs: number;
  /** How long one connect of the LISTEN connection may take, in ms (pg's connectionTimeoutMillis); 0 = unbounded. */
  connectTimeoutMs?: number;
  logger: PgLogger;
  onEvents: (events: StoreEvent[]) => void;
  /** Reconnect backoff bounds (ms); tests shorten them. */
  backoff?: { initialMs: number; maxMs: number };
}

export interface WakeSource {
  /** Resolves once LISTEN is active (or at once in poll-only mode). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A dedicated LISTEN connection (never from the pool: a pooled client is
 * handed to other queries and may be a PgBouncer transaction slot). On any
 * error or server restart it reconnects with capped exponential backoff and,
 * once back, emits a synthetic "wake" — notifications sent while it was away
 * are lost, so workers must re-check. A slow poll timer backs it up; in
 * poll-only mode that timer is the only source of wake-ups.
 */
export function createWakeSource(o: WakeSourceOptions): WakeSource {
  const backoff = o.backoff ?? { initialMs: 100, maxMs: 5_000 };
  let client: pg.Client | undefined;
  let closed = false;
  let failures = 0;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let pollTimer: NodeJS.Timeout | undefined;

  const onNotification = (msg: pg.Notification): void => {
    if (msg.channel !== o.channel) return;
    const decoded = decodeWake(msg.payload);
    if (decoded.origin !== undefined && decoded.origin === o.origin) return;
    o.onEvents(decoded.events);
  };

  const connect = async (): Promise<void> => {
    // TCP keepalive: a connection silently dropped by the network is noticed, not waited on forever.
    const c = new pg.Client({
      connectionString: o.connectionString,
      application_name: o.applicationName,
      keepAlive: true,
      connectionTimeoutMillis: o.connectTimeoutMs ?? 0,
    });
    // Attached before connect so an early failure is never an unhandled 'error'.
    c.on("error", (err) => lost(c, err));
    c.on("end", () => lost(c, undefined));
    c.on("notification", onNotification);
    try {
      await c.connect();
      await c.query(`LISTEN ${quoteIdent(o.channel)}`);
    } catch (err) {
      c.removeAllListeners("end");
      c.end().catch(() => undefined);
      throw err;
    }
    if (closed) {
      await c.end();
      return;
    }
    client = c;
    failures = 0;
  };

  const lost = (c: pg.Client, err: Error | undefined): void => {
    if (client !== c || closed) return;
    client = undefined;
    o.logger.warn({ err }, "okengine postgres: LISTEN connection lost; reconnecting");
    c.removeAllListeners("end");
    c.end().catch(() => undefined);
    scheduleReconnect();
  };

  const scheduleReconnect = (): void => {
    if (closed || reconnectTimer !== undefined) return;
    const delay = Math.min(backoff.maxMs, backoff.initialMs * 2 ** failures) * (0.5 + Math.random() / 2);
    failures++;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      connect().then(
        // Notifications sent while we were away are gone: make everyone look.
        () => {
          if (!closed) o.onEvents([{ kind: "wake" }]);
        },
        (err: unknown) => {
          o.logger.warn({ err, attempt: failures }, "okengine postgres: LISTEN reconnect failed");
          scheduleReconnect();
        },
      );
    }, delay);
    reconnectTimer.unref();
  };

  return {
    async start() {
      if (o.listen) await connect();
      const tick = (): void => {
        pollTimer = setTimeout(
          () => {
            if (closed) return;
            o.onEvents([{ kind: "wake" }]);
            tick();
          },
          Math.max(0, nextPollAt(Date.now(), o.pollIntervalMs) - Date.now()),
        );
        pollTimer.unref();
      };
      tick();
    },
    async close() {
      closed = true;
      if (reconnectTimer !== undefined) clearTimeout(reconnectTimer);
      if (pollTimer !== undefined) clearTimeout(pollTimer);
      reconnectTimer = pollTimer = undefined;
      const c = client;
      client = undefined;
      if (c) {
        c.removeAllListeners("end");
        await c.end().catch(() => undefined);
      }
    },
  };
}

/**
 * When the next safety-net poll tick is due. Every consumer re-checks on a
 * tick (each once signal's pool sends a claim, the schedules are re-read), a
 * burst of queries on the pool; schedule slots fall on whole seconds
 * (`every` slots are multiples of the interval since the epoch, cron slots
 * whole minutes), so a fire queued behind that burst starts late. Ticks of a
 * slow poll (2 s or more) are therefore put half a second off the whole second,
 * within 500 ms of the interval; a fast poll (poll-only mode) ticks evenly.
 */
export function nextPollAt(now: number, intervalMs: number): number {
  if (intervalMs < 2_000) return now + intervalMs;
  const at = now + intervalMs;
  return at - (((at % 1_000) + 1_000) % 1_000) + 500;
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
