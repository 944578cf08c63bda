/** Tracks a store's health from its failing calls and probes, with backoff, until it can commit again. */
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
}

export interface HealthMonitor {
  health(): StoreHealth;
  /** A call failed with `e`: if it is an outage, the store is unavailable until a probe succeeds. */
  failed(e: unknown): void;
  /** `p`, with an outage it rejects with reported to the monitor. */
  watch<T>(p: Promise<T>): Promise<T>;
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

  return {
    health: () => state,
    failed,
    watch: (p) =>
      p.catch((e: unknown) => {
        failed(e);
        throw e;
      }),
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
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
 * `monitor`; the functions named in `skip` are left as they are.
 */
export function reportOutages<T extends object>(
  methods: T,
  monitor: HealthMonitor,
  skip: readonly string[],
): T {
  const out = { ...methods } as Record<string, unknown>;
  for (const [name, fn] of Object.entries(methods)) {
    if (typeof fn !== "function" || skip.includes(name)) continue;
    out[name] = (...args: unknown[]): unknown => {
      const r: unknown = (fn as (...a: unknown[]) => unknown).apply(methods, args);
      return r instanceof Promise ? monitor.watch(r) : r;
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
