/** Cross-process wake-ups on postgres over LISTEN/NOTIFY. */
import pg from "pg";
import type { StoreEvent } from "../types.ts";
import { connectTimedOut } from "./postgres-health.ts";

/** The logger methods the listener uses (PgLogger fits; declared here so this file needs no import of the context). */
interface PgLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  /** A LISTEN connection that is back. */
  info?(obj: object, msg?: string): void;
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
  /** What log lines call this connection. @default "LISTEN for wake-ups" */
  name?: string;
}

export interface WakeSource {
  /**
   * Starts the poll timer and opens the LISTEN connection (none in poll-only mode). Resolves once
   * that first connect has succeeded or failed: a failed one is an outage like a lost connection,
   * retried with backoff (the poll covering it) until it is back or close() is called.
   */
  start(): Promise<void>;
  /** Stops retries and polls and ends the connection, one still connecting included. */
  close(): Promise<void>;
}

/**
 * A dedicated LISTEN connection (never from the pool: a pooled client is
 * handed to other queries and may be a PgBouncer transaction slot). Whether its
 * first connect fails or a later error or server restart drops it, it
 * reconnects with capped exponential backoff and, once back, emits a synthetic
 * "wake" — notifications sent while it was away are lost, so workers must
 * re-check. An outage is logged twice: one warn when it begins, one info when
 * it ends (the tries in between are quiet). A slow poll timer backs it up,
 * running whether LISTEN is up or not; in poll-only mode that timer is the only
 * source of wake-ups.
 */
export function createWakeSource(o: WakeSourceOptions): WakeSource {
  const backoff = o.backoff ?? { initialMs: 100, maxMs: 5_000 };
  const name = o.name ?? "LISTEN for wake-ups";
  let client: pg.Client | undefined;
  /** The connect in flight: close() aborts it and waits for it, so no connection outlives close(). */
  let attempt: { client: pg.Client; done: Promise<void> } | undefined;
  let started: Promise<void> | undefined;
  let closed = false;
  /** While LISTEN is down: since when (performance.now()), connects failed and retries scheduled. */
  let outage: { since: number; failed: number; retries: number } | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let pollTimer: NodeJS.Timeout | undefined;

  const onNotification = (msg: pg.Notification): void => {
    if (msg.channel !== o.channel) return;
    const decoded = decodeWake(msg.payload);
    if (decoded.origin !== undefined && decoded.origin === o.origin) return;
    o.onEvents(decoded.events);
  };

  /** Marks LISTEN down: the first call of an outage logs it, the later ones only count. */
  const down = (err: unknown, connectFailed: boolean): void => {
    if (outage !== undefined) {
      if (connectFailed) outage.failed++;
      return;
    }
    outage = { since: performance.now(), failed: connectFailed ? 1 : 0, retries: 0 };
    const reason = err === undefined ? "connection ended" : describeError(err);
    o.logger.warn(
      { err, channel: o.channel },
      `okengine postgres: ${name} is down (${reason}); polling every ${o.pollIntervalMs} ms and reconnecting until it is back`,
    );
  };

  const connected = (c: pg.Client): void => {
    if (closed) {
      c.removeAllListeners("end");
      c.end().catch(() => undefined);
      return;
    }
    client = c;
    if (outage === undefined) return;
    const downMs = Math.round(performance.now() - outage.since);
    const attempts = outage.failed + 1;
    outage = undefined;
    o.logger.info?.(
      { channel: o.channel, downMs, attempts },
      `okengine postgres: ${name} is back after ${downMs} ms (${attempts} connect attempt${attempts === 1 ? "" : "s"})`,
    );
    // Notifications sent while it was down are gone: make everyone look.
    o.onEvents([{ kind: "wake" }]);
  };

  const failed = (c: pg.Client, err: unknown): void => {
    c.removeAllListeners("end");
    c.end().catch(() => undefined);
    if (closed) return;
    down(connectTimedOut(err, o.connectTimeoutMs ?? 0), true);
    scheduleRetry();
  };

  /** One connect; never rejects (a failure is counted and retried). */
  const tryConnect = (): Promise<void> => {
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
    const done = (async () => {
      await c.connect();
      await c.query(`LISTEN ${quoteIdent(o.channel)}`);
    })()
      .then(
        () => connected(c),
        (err: unknown) => failed(c, err),
      )
      .finally(() => {
        if (attempt?.client === c) attempt = undefined;
      });
    attempt = { client: c, done };
    return done;
  };

  const lost = (c: pg.Client, err: Error | undefined): void => {
    if (client !== c || closed) return;
    client = undefined;
    c.removeAllListeners("end");
    c.end().catch(() => undefined);
    down(err, false);
    scheduleRetry();
  };

  const scheduleRetry = (): void => {
    if (closed || retryTimer !== undefined || outage === undefined) return;
    // The same schedule whether the first connect failed or a live connection was lost.
    const delay =
      Math.min(backoff.maxMs, backoff.initialMs * 2 ** outage.retries++) * (0.5 + Math.random() / 2);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (!closed) void tryConnect();
    }, delay);
    retryTimer.unref();
  };

  /**
   * The safety-net poll. Ticks are spaced by performance.now() (setTimeout's own clock): a step of
   * the host's wall clock (NTP) neither delays nor bunches them. The wall clock is read once, for
   * the phase nextPollAt gives the first tick.
   */
  const startPolling = (): void => {
    const wall = Date.now();
    let due = performance.now() + (nextPollAt(wall, o.pollIntervalMs) - wall);
    const arm = (): void => {
      pollTimer = setTimeout(
        () => {
          pollTimer = undefined;
          if (closed) return;
          const now = performance.now();
          due += o.pollIntervalMs;
          // A whole interval late (a suspended process): the next tick is an interval away, not at once.
          if (due <= now) due = now + o.pollIntervalMs;
          o.onEvents([{ kind: "wake" }]);
          if (!closed) arm();
        },
        Math.max(0, due - performance.now()),
      );
      pollTimer.unref();
    };
    arm();
  };

  return {
    start() {
      if (closed) return Promise.resolve();
      started ??= (async () => {
        startPolling();
        if (o.listen) await tryConnect();
      })();
      return started;
    },
    async close() {
      closed = true;
      if (retryTimer !== undefined) clearTimeout(retryTimer);
      if (pollTimer !== undefined) clearTimeout(pollTimer);
      retryTimer = pollTimer = undefined;
      const pending = attempt;
      if (pending) {
        // Destroying the socket fails the connect at once; end() would wait for a server that may never answer.
        pending.client.connection.stream.destroy(new Error("LISTEN connection closed while connecting"));
        await pending.done;
      }
      const c = client;
      client = undefined;
      if (c) {
        c.removeAllListeners("end");
        await c.end().catch(() => undefined);
      }
    },
  };
}

/** An error's message for a log line; a refused dual-stack connect is an AggregateError with an empty one. */
function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.message === "")
    return err.errors.map((e: unknown) => describeError(e)).join("; ");
  if (err instanceof Error) return err.message || ((err as { code?: string }).code ?? err.name);
  return String(err);
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
