/** Tracks a store's health from its failing calls and probes, with backoff, until it can commit again; says when calls stall. */
import type { StoreHealth } from "./health-types.ts";

const OK: StoreHealth = Object.freeze({ ok: true });

export interface HealthLogger {
  warn(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
}

export interface HealthMonitorOptions {
  /** Driver name for log lines. */
  name: string;
  /** One bounded check that the store can commit; rejects when it cannot. */
  probe(): Promise<void>;
  /** Which errors mean "the store is unavailable" (not a refusal of bad input). */
  isOutage(e: unknown): boolean;
  logger?: HealthLogger;
  /** First probe this long after a failure, doubling to `maxDelayMs`. */
  minDelayMs?: number;
  maxDelayMs?: number;
  /**
   * A call (one `watch` names) still unanswered after this long is a stall, logged at `warn` with
   * the calls waiting — a database that waits on a lock fails nothing, so without it a table lock
   * held for minutes hangs every emit with not one log line — and its end at `info`. 0: off.
   */
  stallWarnMs?: number;
  /** Said with a stall: where to look (PostgreSQL: pg_stat_activity). */
  stallHint?: string;
}

export interface HealthMonitor {
  health(): StoreHealth;
  /** A call failed with `e`: if it is an outage, the store is unavailable until a probe succeeds. */
  failed(e: unknown): void;
  /** `p`, with an outage it rejects with reported to the monitor; `call` named, watched for a stall too. */
  watch<T>(p: Promise<T>, call?: string): Promise<T>;
  /** Stops probing (store closed). */
  stop(): void;
}

export function createHealthMonitor(o: HealthMonitorOptions): HealthMonitor {
  const minDelay = o.minDelayMs ?? 100;
  const maxDelay = o.maxDelayMs ?? 2_000;
  let state: StoreHealth = OK;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;
  let delay = minDelay;
  /** When the outage began on the monotonic clock: `since` is wall time, and a host clock step would skew a difference of it. */
  let downAt = 0;

  const schedule = (): void => {
    if (stopped || timer !== undefined || probing) return;
    timer = setTimeout(() => {
      timer = undefined;
      probing = true;
      o.probe().then(
        () => {
          probing = false;
          if (state.ok || stopped) return;
          const downMs = Math.round(performance.now() - downAt);
          o.logger?.info?.({ driver: o.name, downMs }, `${o.name} store available again after ${downMs} ms`);
          state = OK;
          delay = minDelay;
        },
        (e: unknown) => {
          probing = false;
          if (!state.ok) state = { ...state, reason: describe(e) };
          delay = Math.min(delay * 2, maxDelay);
          schedule();
        },
      );
    }, delay);
    timer.unref();
  };

  const failed = (e: unknown): void => {
    if (stopped || !o.isOutage(e)) return;
    if (state.ok) {
      state = { ok: false, since: Date.now(), reason: describe(e) };
      downAt = performance.now();
      o.logger?.warn(
        { driver: o.name, err: e },
        `${o.name} store unavailable (${state.reason}); probing until it can commit again`,
      );
    }
    schedule();
  };

  // Stalls: the calls in flight by start (a Map iterates in insertion order, so the first is the
  // oldest), checked by a timer that runs only while some are in flight.
  const stallMs = o.stallWarnMs ?? 0;
  const inFlight = new Map<number, { call: string; at: number }>();
  let nextCall = 0;
  let stallTimer: NodeJS.Timeout | undefined;
  /** The stall being reported: when its oldest call started, when it was last said, and of how many calls. */
  let stall: { from: number; saidAt: number; longest: number; saidOf: number } | undefined;

  const checkStall = (): void => {
    const now = performance.now();
    const late = [...inFlight.values()].filter((c) => now - c.at >= stallMs);
    if (late.length === 0) {
      if (stall !== undefined) {
        const waitedMs = Math.round(stall.longest);
        o.logger?.info?.(
          { driver: o.name, waitedMs },
          `${o.name} store calls answer again; the longest waited ${waitedMs} ms`,
        );
        stall = undefined;
      }
      if (inFlight.size === 0) {
        clearInterval(stallTimer);
        stallTimer = undefined;
      }
      return;
    }
    const waitedMs = Math.round(now - late[0]!.at);
    // An outage is said already (and its calls fail on their own); a stall is a store that is up.
    if (!state.ok) return;
    if (stall !== undefined) {
      stall.longest = Math.max(stall.longest, now - late[0]!.at);
      // Said again each minute it lasts, and as soon as twice as many calls wait as when it was last
      // said (the first line is said at the first call past the bound, before the rest pile up):
      // never once per check.
      if (now - stall.saidAt < 60_000 && late.length < 2 * stall.saidOf) return;
      stall.saidAt = now;
      stall.saidOf = late.length;
    } else stall = { from: late[0]!.at, saidAt: now, longest: now - late[0]!.at, saidOf: late.length };
    const counts = new Map<string, number>();
    for (const c of late) counts.set(c.call, (counts.get(c.call) ?? 0) + 1);
    const calls = [...counts].map(([call, n]) => (n === 1 ? call : `${call} ×${n}`)).join(", ");
    o.logger?.warn(
      { driver: o.name, waitedMs, waiting: late.length, calls },
      `${o.name} store: ${late.length} call(s) unanswered for ${Math.round(waitedMs / 1000)} s or more (${calls}); ` +
        `the store is up but does not answer them — a lock another session holds, or an overloaded server` +
        (o.stallHint === undefined ? "" : `. ${o.stallHint}`),
    );
  };

  const watchStall = <T>(p: Promise<T>, call: string): Promise<T> => {
    const id = nextCall++;
    inFlight.set(id, { call, at: performance.now() });
    if (stallTimer === undefined && !stopped) {
      // Checked at a fraction of the bound: a stall is said at most a quarter late.
      stallTimer = setInterval(checkStall, Math.max(10, Math.floor(stallMs / 4)));
      stallTimer.unref();
    }
    const done = (): void => void inFlight.delete(id);
    return p.then(
      (v) => {
        done();
        return v;
      },
      (e: unknown) => {
        done();
        throw e;
      },
    );
  };

  return {
    health: () => state,
    failed,
    watch: (p, call) =>
      (call !== undefined && stallMs > 0 ? watchStall(p, call) : p).catch((e: unknown) => {
        failed(e);
        throw e;
      }),
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      clearInterval(stallTimer);
      stallTimer = undefined;
    },
  };
}

const describe = (e: unknown): string => {
  const cause = (e as { cause?: unknown } | null)?.cause;
  const text = e instanceof Error ? e.message : String(e);
  return cause instanceof Error && cause.message !== text ? `${text}: ${cause.message}` : text;
};

/**
 * `methods` with every promise-returning function reporting its failures to
 * `monitor`; the functions named in `skip` are left as they are. Every other one is watched for a
 * stall too, by name, except those in `longCalls` (reads and sweeps that may take long by design).
 */
export function reportOutages<T extends object>(
  methods: T,
  monitor: HealthMonitor,
  skip: readonly string[],
  longCalls: readonly string[] = [],
): T {
  const out = { ...methods } as Record<string, unknown>;
  for (const [name, fn] of Object.entries(methods)) {
    if (typeof fn !== "function" || skip.includes(name)) continue;
    const call = longCalls.includes(name) ? undefined : name;
    out[name] = (...args: unknown[]): unknown => {
      const r: unknown = (fn as (...a: unknown[]) => unknown).apply(methods, args);
      return r instanceof Promise ? monitor.watch(r, call) : r;
    };
  }
  return out as T;
}

/** What a background loop's failure log needs of the store: its outage classification and health. */
export interface OutageAwareStore {
  isUnavailable?(err: unknown): boolean;
  health?(): StoreHealth;
}

export interface LoopLogger {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/**
 * Tells a log which outage it already spoke of: the call returns true at the first failure of each
 * outage the store reports (its health down, told apart by `since`), false at every later one of
 * the same outage, and undefined while the store reports none (the failure is something else).
 * One warn per outage, the rest at debug: the store logs the outage and its end itself.
 */
export function outageOnce(store: OutageAwareStore | undefined): () => boolean | undefined {
  /** The `since` of the outage already spoken of. */
  let warned: number | undefined;
  return () => {
    const health = store?.health?.();
    if (health === undefined || health.ok) return undefined;
    if (warned === health.since) return false;
    warned = health.since;
    return true;
  };
}

/**
 * The failure log of a loop that retries a store call on a timer (a worker pool's claim, the wake
 * scheduler, the clock). An outage the store knows about (its `health()` down, and the error one
 * it calls unavailable) is logged once per outage at `warn`, without a stack — the store logs the
 * outage and its end itself — and each later failure of the same outage at `debug`: at `error`
 * with a stack per tick, 6 queues made 257 lines in 30 s. Any other error is logged at `error`.
 */
export function loopFailureLog(
  store: OutageAwareStore,
  logger: LoopLogger,
): (err: unknown, fields: object, msg: string) => void {
  const once = outageOnce(store);
  return (err, fields, msg) => {
    const health = store.health?.();
    const down = health !== undefined && !health.ok;
    // A store that cannot classify errors: its health alone says whether this failure is the outage.
    const transient = store.isUnavailable?.(err) ?? down;
    if (!transient) {
      logger.error({ ...fields, err }, msg);
      return;
    }
    const error = describe(err);
    if (once() === false) {
      logger.debug({ ...fields, error }, `${msg} (store unavailable: ${error})`);
      return;
    }
    logger.warn(
      { ...fields, error },
      `${msg} (store unavailable: ${error}; logged once per outage, the store logs when it is back)`,
    );
  };
}
