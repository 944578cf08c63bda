/** Boot's wait for an unreachable store: open() and each later boot step retried with backoff on connection-class errors, bounded, logged, stoppable. */
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import type { Store, StoreOpenOptions } from "../store/types.ts";

/** The first retry comes after this many ms, doubling up to MAX_DELAY_MS; each sleep is jittered (jittered()). */
export const FIRST_DELAY_MS = 100;
export const MAX_DELAY_MS = 2_000;

/**
 * A sleep of between half and all of `delayMs` (`random` in [0, 1)): processes that lost their
 * database together (a fleet restarting with it) do not retry in step, all on the same ms.
 */
export function jittered(delayMs: number, random: () => number): number {
  return Math.round(delayMs * (0.5 + random() / 2));
}

export interface StoreWaitOptions {
  store: Store;
  /** How long to keep trying from the first attempt, in ms; 0 = the first failure stops the boot. */
  timeoutMs: number;
  logger: Logger;
  /** Resolves when the app stops: the wait (a sleep or an open in flight) ends at once. */
  stopped: Promise<void>;
  /** The fix of the error thrown when the bound is reached (which setting names the address, which the bound). */
  fix: string;
  /** Told when an attempt failed and another will follow. */
  onWaiting?: () => void;
  /** The jitter's source, in [0, 1); tests pass a seeded one. Default Math.random. */
  random?: () => number;
}

/** The code of an error or of its cause (pg's SQLSTATE or Node's ECONNREFUSED), for the log line. */
function codeOf(err: unknown): string | undefined {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && !code.startsWith("OKE")) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** `ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5999` — one line, whatever the error. */
export function describeFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = codeOf(err);
  return code === undefined || message.includes(code) ? message : `${code}: ${message}`;
}

/**
 * Opens the store; while open() fails with an error the store calls unavailable (`isUnavailable`),
 * tries again after 100 ms, doubling to 2 s (each sleep jittered down to half), until `timeoutMs` from the first attempt — one `warn`
 * per failure saying what failed, where, the attempt, the next try and the time left (no stack). Any other
 * error (a bad migration, permission denied, a schema newer than this code) is thrown at once.
 * `open`: what store.open() is told (the instance opening it).
 */
export function openStoreWaiting(options: StoreWaitOptions, open?: StoreOpenOptions): Promise<void> {
  return waitThroughOutage(options, () => options.store.open(open), undefined);
}

/**
 * One step of boot after open() (the fleet check, the orphan scan, the schedules' reconcile): run
 * again, with openStoreWaiting's backoff, bound and log lines, while it fails with an error the store
 * calls unavailable — a database that let open() through can still refuse the next connection
 * (53300 at a connection limit) or drop one. `step` names it in the log and in OKE1096. Unlike
 * open(), a step in flight is awaited to its end, even after stop(): the runtimes' stop() waits for
 * their own start(), and boot's next check says it was stopped. Only the sleep between tries ends at
 * a stop.
 */
export function storeStepWaiting<T>(
  options: StoreWaitOptions & { step: string },
  run: () => Promise<T>,
): Promise<T> {
  return waitThroughOutage(options, run, options.step);
}

/** `attempt` until it succeeds or fails with a non-outage; `step` undefined: it is open() (raced with the stop and the bound). */
async function waitThroughOutage<T>(
  options: StoreWaitOptions,
  attempt: () => Promise<T>,
  step: string | undefined,
): Promise<T> {
  const { store, timeoutMs, logger, stopped } = options;
  const address = store.address ?? store.driver;
  const during = step === undefined ? "" : ` while ${step}`;
  // A step's failure is seen after its whole attempt: whether the app stopped meanwhile is read then.
  let isStopped = false;
  void stopped.then(() => (isStopped = true));
  // Elapsed time on the monotonic clock: a host clock step must neither end the wait nor stretch it.
  const startedAt = performance.now();
  const waited = (): number => Math.round(performance.now() - startedAt);
  const stoppedError = (): OkeError =>
    new OkeError({
      code: "OKE1097",
      message:
        step === undefined
          ? `oke boot: stopped while waiting for the store at ${address}`
          : `oke boot: stopped while ${step}, waiting for the store at ${address}`,
    });
  let delay = FIRST_DELAY_MS;
  for (let n = 1; ; n++) {
    const outcome = await (step === undefined
      ? raced(attempt, stopped, timeoutMs - waited())
      : settled(attempt));
    if (outcome === "stopped") throw stoppedError();
    if (outcome.kind === "hung")
      throw new OkeError({
        code: "OKE1096",
        message: `oke boot: could not reach the store at ${address} in ${timeoutMs} ms (${n} attempt${n === 1 ? "" : "s"}; last: open() still running after ${outcome.afterMs} ms)`,
        fix: options.fix,
      });
    if (outcome.kind === "ok") {
      if (n > 1)
        logger.info(
          { address, attempt: n, waitedMs: waited(), ...(step === undefined ? {} : { step }) },
          `okengine: the store at ${address} is reachable (attempt ${n})`,
        );
      return outcome.value;
    }
    const { err } = outcome;
    if (store.isUnavailable?.(err) !== true) throw err;
    if (isStopped) throw stoppedError();
    const remaining = timeoutMs - waited();
    if (remaining <= 0)
      throw new OkeError({
        code: "OKE1096",
        message:
          `oke boot: could not reach the store at ${address}${during} ` +
          (timeoutMs === 0
            ? `(${describeFailure(err)})`
            : `in ${timeoutMs} ms (${n} attempts; last: ${describeFailure(err)})`),
        fix: options.fix,
        cause: err,
      });
    const next = Math.min(jittered(delay, options.random ?? Math.random), remaining);
    // The error's code and message, not the error: its stack (pg's, Node's net internals) says
    // nothing about an unreachable host, and up to 20 of them in a row buried the one line that did.
    const error = describeFailure(err);
    logger.warn(
      {
        code: codeOf(err),
        address,
        attempt: n,
        nextTryMs: next,
        givesUpInMs: remaining,
        ...(step === undefined ? {} : { step }),
      },
      `okengine: the store at ${address} is unavailable (${error}); attempt ${n}, next try in ${next} ms, giving up in ${remaining} ms`,
    );
    options.onWaiting?.();
    let timer: NodeJS.Timeout | undefined;
    const slept = await Promise.race([
      new Promise<true>((r) => (timer = setTimeout(() => r(true), next))),
      stopped.then(() => false),
    ]);
    clearTimeout(timer);
    if (!slept) throw stoppedError();
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}

type Outcome<T> =
  { kind: "ok"; value: T } | { kind: "failed"; err: unknown } | { kind: "hung"; afterMs: number };

/** The attempt to its end. */
function settled<T>(attempt: () => Promise<T>): Promise<Outcome<T>> {
  return attempt().then(
    (value) => ({ kind: "ok" as const, value }),
    (err: unknown) => ({ kind: "failed" as const, err }),
  );
}

/**
 * The attempt, or the stop, or the bound (`left` ms): an open still in flight when the app stops or
 * the bound passes is left to settle on its own (close() waits for it). A connect that hangs (a host
 * that drops packets) ends at the bound.
 */
async function raced<T>(
  attempt: () => Promise<T>,
  stopped: Promise<void>,
  left: number,
): Promise<Outcome<T> | "stopped"> {
  let deadline: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    settled(attempt),
    stopped.then(() => "stopped" as const),
    ...(left > 0
      ? [
          new Promise<Outcome<T>>(
            (r) => (deadline = setTimeout(() => r({ kind: "hung", afterMs: left }), left)),
          ),
        ]
      : []),
  ]);
  clearTimeout(deadline);
  return outcome;
}
