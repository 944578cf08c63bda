/** The postgres driver: the Store contract over pg, with LISTEN/NOTIFY wake-ups. */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { errorForLog } from "../../log/logger.ts";
import { storeErrors } from "../index.ts";
import { createHealthMonitor, reportOutages } from "../store-health.ts";
import { createStoreListeners } from "../store-listeners.ts";
import type { Store, StoreEvent } from "../types.ts";
import { claim } from "./postgres-claim.ts";
import * as consoleQueries from "./postgres-console.ts";
import { type PgContext, type PgLogger, withoutPreparedStatements } from "./postgres-context.ts";
import { claimedAtEmit, enqueue } from "./postgres-enqueue.ts";
import { postgresStoreErrors } from "./postgres-errors.ts";
import { beginCompensation } from "./postgres-compensation.ts";
import { checkConnectionString } from "./postgres-connection-string.ts";
import { createPostgresFanout } from "./postgres-fanout.ts";
import { connectTimedOut, isPostgresOutage, probePostgres } from "./postgres-health.ts";
import { appendGrouped, finishGrouped, startRunGrouped } from "./postgres-journal-batch.ts";
import { park } from "./postgres-journal-write.ts";
import { migrate } from "./postgres-migrate.ts";
import * as admin from "./postgres-queue-admin.ts";
import * as runs from "./postgres-runs.ts";
import * as schedules from "./postgres-schedules.ts";
import * as idempotency from "./postgres-idempotency.ts";
import * as writeLane from "./postgres-write-lane.ts";
import { pruneRuns } from "./postgres-retention.ts";
import { leaveClaimsToLease, releaseClaimed, settle } from "./postgres-settle.ts";
import { createWakeSource, quoteIdent, type WakeSource } from "./postgres-wake.ts";

export interface PostgresStoreOptions {
  /**
   * PostgreSQL connection string, e.g. `postgres://user:password@host:5432/db` (or a socket
   * directory, `/var/run/postgresql db`); anything else throws OKE1098 here. Used
   * for the pool the store creates (unless `pool` is given) and always for the
   * dedicated LISTEN connection, which never comes from a pool.
   */
  connectionString: string;
  /**
   * Schema that holds okengine's tables, created and migrated by `open()`.
   * Letters, digits and underscores. Several apps (or test files) can share a
   * database with one schema each.
   *
   * @default "okengine"
   */
  schema?: string;
  /**
   * Use this pool instead of creating one — e.g. the app's own pool, so that
   * `enqueue(…, { tx })` clients come from it. The store attaches an 'error'
   * listener (so an idle connection dropped by a server restart cannot crash
   * the process) and removes it on `close()`, but never ends the pool.
   */
  pool?: pg.Pool;
  /**
   * Maximum connections of the pool the store creates. Ignored with `pool`.
   *
   * @default 10
   */
  poolSize?: number;
  /**
   * Wake-ups through LISTEN/NOTIFY: every commit that makes work claimable
   * sends one NOTIFY, and a dedicated LISTEN connection turns notifications
   * from any process into `subscribe()` events. Set `false` behind PgBouncer in
   * transaction pooling mode (LISTEN needs a session): no NOTIFY is sent and
   * workers are woken by a timer every `pollIntervalMs` instead.
   *
   * @default true
   */
  notify?: boolean;
  /**
   * Period of the synthetic `{ kind: "wake" }` event. With `notify` it is the
   * slow safety net behind LISTEN (a lost notification costs at most this
   * long); in poll-only mode it is the wake-up latency.
   *
   * @default 5000
   */
  pollIntervalMs?: number;
  /**
   * How long before a sleeping run's wake time the instance that parked it
   * claims it (a committed claim), so the claim's round trip is off the
   * wake's path: the run then resumes at its wake time from a local timer.
   * About the claim's round trip at its worst; 0 claims when due.
   *
   * @default 50
   */
  wakeLookaheadMs?: number;
  /**
   * How long one connection attempt (TCP, TLS, authentication) may take, in ms, for the pool's
   * connections (unless `pool` is given) and the LISTEN ones; `0` = no bound. Without it a connect
   * to a host that drops packets, or to one that accepts TCP and never answers, waits for the
   * kernel (minutes) or forever, and `close()` waits with it. Not a bound on waiting for a free
   * pooled connection.
   *
   * @default 5000
   */
  connectAttemptTimeoutMs?: number;
  /**
   * A store call still unanswered after this long, in ms, is logged at `warn` with the calls
   * waiting (again each minute it lasts, and when twice as many wait), and its end at `info`. PostgreSQL fails nothing while a
   * statement waits on a lock (a `LOCK TABLE`, a long transaction holding a row), so without it such
   * a wait hangs emits and deliveries with no log line. Pruning, the Console's reads and operators'
   * bulk replays and discards are not watched (they may take long by design). `0` = off.
   *
   * @default 10000
   */
  stallWarnMs?: number;
  /**
   * Where connection trouble is reported (pool errors, LISTEN reconnects).
   * A pino logger fits.
   *
   * @default silent
   */
  logger?: PgLogger;
}

/**
 * PostgresStoreOptions.wakeLookaheadMs's default: ~3× the claim's client-observed round trip at p90
 * on the shared 2-core machine at load 7–11 (12–19 ms; p99 there ~60 ms), ~4× a quiet machine's
 * wake p99 (bench/README.md, "S9 wake, claimed ahead"); far below any sleep worth parking for.
 */
const WAKE_LOOKAHEAD_MS = 50;

/**
 * PostgresStoreOptions.connectAttemptTimeoutMs's default: a connect on a LAN or in one region takes
 * milliseconds (a few round trips: TCP, TLS, SCRAM); 5 s leaves room for a loaded server or a far
 * one, and keeps app.stop() after a boot that gave up, which waits for the attempt in flight, short.
 */
export const CONNECT_ATTEMPT_TIMEOUT_MS = 5_000;

/**
 * PostgresStoreOptions.stallWarnMs's default: a hot call (claim, settle, an emit's insert) answers in
 * milliseconds even under load (bench S3/S4 p99 under 100 ms); ten seconds without an answer is
 * something holding it, and still short enough to be said before a client's request times out.
 */
const STALL_WARN_MS = 10_000;

/** Calls that may run long by design — sweeps and the Console's reads of big tables — never reported as stalls. */
const LONG_CALLS = [
  "pruneDelivered",
  "pruneRuns",
  "pruneFires",
  "pruneTape",
  "pruneIdempotencyKeys",
  "pageMessages",
  "pageRuns",
  "pageAudit",
  "runCounts",
  "queueBacklog",
  "throughput",
  "listRuns",
  "listFires",
  "stats",
  "deadLetters",
  "readTape",
  // Operators' bulk actions (up to 100 000 messages a call).
  "replay",
  "discard",
  "discardPending",
];

const silent: PgLogger = { warn: () => undefined, error: () => undefined };

/** pg's Client with every connect bounded by `timeoutMs` (the pool builds its clients from it); 0 = pg's own. */
function boundedClient(timeoutMs: number): typeof pg.Client {
  if (timeoutMs === 0) return pg.Client;
  return class BoundedClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super({
        ...(typeof config === "string" ? { connectionString: config } : config),
        connectionTimeoutMillis: timeoutMs,
      });
    }
  };
}

/** Store name → quoted identifier; names are restricted so they can live inside SQL text. */
function schemaIdent(schema: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,47}$/.test(schema)) throw postgresStoreErrors.badSchemaName(schema);
  return quoteIdent(schema);
}

/**
 * The postgres driver of the Store contract (driver "postgres"): `pg` with a
 * pool, versioned migrations applied by `open()`, claim as one SKIP LOCKED
 * statement, batched settle, journal rows per (run, seq) fenced by the lease
 * owner, and LISTEN/NOTIFY wake-ups with a poll fallback. Many app processes
 * on one database is how okengine scales out.
 */
export function createPostgresStore(options: PostgresStoreOptions): Store {
  // Before any connect: a string pg cannot use would otherwise be retried as an outage (OKE1098).
  checkConnectionString(options.connectionString, "createPostgresStore(): connectionString");
  const schema = options.schema ?? "okengine";
  const s = schemaIdent(schema);
  const logger = options.logger ?? silent;
  const ownsPool = options.pool === undefined;
  const origin = randomBytes(8).toString("hex");
  const connectTimeoutMs = Math.max(0, options.connectAttemptTimeoutMs ?? CONNECT_ATTEMPT_TIMEOUT_MS);
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString,
      max: options.poolSize ?? 10,
      application_name: `okengine:${schema}`,
      // On each client, not the pool: the pool's connectionTimeoutMillis would also bound the wait
      // for a free connection, failing requests queued behind a busy pool.
      Client: boundedClient(connectTimeoutMs),
    });
  const onPoolError = (err: Error): void =>
    // Not the error as it is: pg-pool hangs the whole pg.Client on it (errorForLog leaves it out).
    logger.warn({ err: errorForLog(err) }, "okengine postgres: idle pool connection failed; it is replaced");
  pool.on("error", onPoolError);
  // Poll-only is the PgBouncer transaction-pooling setting: no statement prepared by name there.
  if (options.notify === false) withoutPreparedStatements(pool);

  const listeners = createStoreListeners(logger);
  const emit = (events: StoreEvent[]): void => {
    for (const event of events) listeners.emit(event);
  };

  const ctx: PgContext = {
    pool,
    s,
    channel: `okengine_${schema}`,
    notify: options.notify ?? true,
    origin,
    emit,
    logger,
  };
  const wake: WakeSource = createWakeSource({
    connectionString: options.connectionString,
    channel: ctx.channel,
    origin,
    applicationName: `okengine-listen:${schema}`,
    listen: ctx.notify,
    pollIntervalMs: options.pollIntervalMs ?? 5_000,
    connectTimeoutMs,
    logger,
    onEvents: emit,
  });

  const fanout = createPostgresFanout(ctx, {
    connectionString: options.connectionString,
    schema,
    pollIntervalMs: options.pollIntervalMs ?? 5_000,
    connectTimeoutMs,
    logger,
  });

  let opening: Promise<void> | undefined;
  let closed = false;
  /**
   * The row open() recorded for its `instance`, kept live until that instance's first heartbeat
   * (refreshBooting): a boot longer than the live window must stay counted by a newer migrate().
   */
  let booting: BootingRow | undefined;
  const stopBooting = async (id?: string): Promise<void> => {
    const b = booting;
    if (b === undefined || (id !== undefined && id !== b.id)) return;
    booting = undefined;
    clearInterval(b.timer);
    await b.refresh;
  };
  const startBooting = (id: string): void => {
    if (booting !== undefined) return;
    const b: BootingRow = {
      id,
      refresh: Promise.resolve(),
      timer: setInterval(() => {
        // A failed refresh is tried again on the next tick; the heartbeat reports the database's trouble.
        b.refresh = consoleQueries.refreshBooting(ctx, id).catch(() => undefined);
      }, consoleQueries.BOOTING_REFRESH_MS),
    };
    b.timer.unref();
    booting = b;
  };
  const monitor = createHealthMonitor({
    name: "postgres",
    probe: () => probePostgres(options.connectionString, `okengine-probe:${schema}`),
    isOutage: isPostgresOutage,
    logger,
    stallWarnMs: Math.max(0, options.stallWarnMs ?? STALL_WARN_MS),
    stallHint: `SELECT pid, wait_event_type, wait_event, state, query FROM pg_stat_activity WHERE application_name = 'okengine:${schema}' shows what they wait on, and pg_blocking_pids(pid) who holds it`,
  });

  const store: Store = {
    driver: "postgres",
    address: postgresAddress(options.connectionString),
    isUnavailable: isPostgresOutage,
    wakeLookaheadMs: Math.max(0, options.wakeLookaheadMs ?? WAKE_LOOKAHEAD_MS),
    open(openOptions) {
      if (closed) return Promise.reject(postgresStoreErrors.closed(schema));
      const instance = openOptions?.instance;
      opening ??= (async () => {
        await migrate(pool, schema, s, undefined, instance);
        if (instance !== undefined) startBooting(instance.id);
        await wake.start();
      })().catch(async (e: unknown) => {
        await stopBooting();
        throw connectTimedOut(e, connectTimeoutMs);
      });
      // A failed open may be retried.
      opening.catch(() => (opening = undefined));
      return opening;
    },
    async close() {
      if (closed) return;
      closed = true;
      monitor.stop();
      await opening?.catch(() => undefined);
      await stopBooting();
      await wake.close();
      await fanout.close();
      await writeLane.flushParkedCompletions(ctx);
      if (ownsPool) await pool.end();
      pool.off("error", onPoolError);
    },
    subscribe: listeners.subscribe,
    ...fanout.store,
    health: () => monitor.health(),

    async enqueue(messages, now, opts) {
      const batch = messages.map((message) => ({ message }));
      if (opts?.tx === undefined) await writeLane.enqueueGrouped(ctx, batch, now);
      else await enqueue(ctx, batch, now, opts.tx);
    },
    async enqueueClaimed(messages, now, claim) {
      const keyed = messages.find((m) => m.key !== null);
      if (keyed) throw storeErrors.keyedClaimAtEmit(keyed.id);
      const at = await writeLane.enqueueGrouped(
        ctx,
        messages.map((message) => ({ message, claim })),
        now,
      );
      return messages.map((m) => claimedAtEmit(m, at, claim));
    },
    claim: (req) => claim(ctx, req),
    settle: (settlements, now, handoff) => settle(ctx, settlements, now, handoff),
    releaseClaimed: (claims, now) => releaseClaimed(ctx, claims, now),
    leaveClaimsToLease: (claims, now) => leaveClaimsToLease(ctx, claims, now),
    deadLetters: (signal, limit) => admin.deadLetters(ctx, signal, limit),
    getMessage: (id) => admin.getMessage(ctx, id),
    replay: (signal, ids, now) => admin.replay(ctx, signal, ids, now),
    resettleDelivered: (req, now) => admin.resettleDelivered(ctx, req, now),
    discard: (signal, ids) => admin.discard(ctx, signal, ids),
    discardPending: (signal, ids) => admin.discardPending(ctx, signal, ids),
    stats: (signal, now) => admin.stats(ctx, signal, now),
    nextLeaseExpiry: (signal) => admin.nextLeaseExpiry(ctx, signal),
    pruneDelivered: (before) => admin.pruneDelivered(ctx, before),

    startRun: (req) => startRunGrouped(ctx, req),
    acquireRun: (req) => runs.acquireRun(ctx, req),
    renewLease: (req) => runs.renewLease(ctx, req),
    append: (req) => appendGrouped(ctx, req),
    park: (req) => park(ctx, req),
    finish: (req) => finishGrouped(ctx, req),
    beginCompensation: (req) => beginCompensation(ctx, req),
    releaseRun: (req) => runs.releaseRun(ctx, req),
    leaveToLease: (req) => runs.leaveToLease(ctx, req),
    claimDueRuns: (req) => runs.claimDueRuns(ctx, req),
    listOrphans: (now, limit, filter) => runs.listOrphans(ctx, now, limit, filter),
    nextWakeAt: (filter) => runs.nextWakeAt(ctx, filter),
    wakeEarly: (runId, now) => runs.wakeEarly(ctx, runId, now),
    terminateRun: (req) => runs.terminateRun(ctx, req),
    getRun: (runId) => runs.getRun(ctx, runId),
    getJournal: (runId) => runs.getJournal(ctx, runId),
    getJournalEnds: (runId, head, tail) => runs.getJournalEnds(ctx, runId, head, tail),
    listRuns: (filter) => runs.listRuns(ctx, filter),

    pageMessages: (req) => consoleQueries.pageMessages(ctx, req),
    pageRuns: (req) => consoleQueries.pageRuns(ctx, req),
    runCounts: () => consoleQueries.runCounts(ctx),
    queueBacklog: () => consoleQueries.queueBacklog(ctx),
    throughput: (from, bucketMs, now) => consoleQueries.throughput(ctx, from, bucketMs, now),
    async heartbeat(info, now) {
      await consoleQueries.heartbeat(ctx, info, now);
      // Its row now has the full info and a heartbeat keeping it live.
      await stopBooting(info.id);
    },
    listInstances: (since) => consoleQueries.listInstances(ctx, since),
    async removeInstance(id) {
      await stopBooting(id);
      await consoleQueries.removeInstance(ctx, id);
    },
    recordAudit: (entry) => consoleQueries.recordAudit(ctx, entry),
    pageAudit: (req) => consoleQueries.pageAudit(ctx, req),
    reconcileSchedules: (declared, now, options) => schedules.reconcileSchedules(ctx, declared, now, options),
    listSchedules: () => schedules.listSchedules(ctx),
    getSchedule: (name) => schedules.getSchedule(ctx, name),
    setSchedulePaused: (name, paused, now) => schedules.setSchedulePaused(ctx, name, paused, now),
    overrideSchedule: (name, spec, now) => schedules.overrideSchedule(ctx, name, spec, now),
    fire: (req) => schedules.fire(ctx, req),
    fireBatch: (reqs) => schedules.fireBatch(ctx, reqs),
    recordScheduleError: (name, error, now) => schedules.recordScheduleError(ctx, name, error, now),
    listFires: (name, limit) => schedules.listFires(ctx, name, limit),
    pruneFires: (before) => schedules.pruneFires(ctx, before),
    pruneRuns: (before, limit) => pruneRuns(ctx, before, limit),
    storeTime: () => schedules.storeTime(ctx),
    claimIdempotencyKey: (req) => writeLane.claimIdempotencyKey(ctx, req),
    renewIdempotencyKey: (req) => idempotency.renewIdempotencyKey(ctx, req),
    completeIdempotencyKey: (req) => writeLane.completeIdempotencyKey(ctx, req),
    releaseIdempotencyKey: (req) => idempotency.releaseIdempotencyKey(ctx, req),
    getIdempotencyKey: (key) => idempotency.getIdempotencyKey(ctx, key),
    pruneIdempotencyKeys: (before) => idempotency.pruneIdempotencyKeys(ctx, before),
  }; // Every call that fails for want of the database turns health() unavailable until a probe commits.
  return reportOutages(store, monitor, ["open", "close", "subscribe", "health", "isUnavailable"], LONG_CALLS);
}

/** An opener's row being kept live (createPostgresStore's `booting`). */
interface BootingRow {
  id: string;
  timer: NodeJS.Timeout;
  /** The refresh in flight (or the last one, settled): close() waits for it. */
  refresh: Promise<void>;
}

/** `host:port/database` of a connection string, never its user or password (for logs and boot errors). */
export function postgresAddress(connectionString: string): string {
  try {
    const u = new URL(connectionString);
    const host = u.hostname || new URLSearchParams(u.search).get("host") || "localhost";
    return `${host}:${u.port || "5432"}${u.pathname.length > 1 ? u.pathname : ""}`;
  } catch {
    return "(unparsable DATABASE_URL)";
  }
}
