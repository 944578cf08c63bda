/** The subscriber list every driver shares for store events. */
import type { StoreEvent, Unsubscribe } from "./types.ts";

/** Where a listener's failure is reported (a pino logger fits). */
export interface ListenerFailureLog {
  warn(obj: object, msg?: string): void;
}

/** The subscriber list every driver keeps: `subscribe` for the Store, `emit` for the driver. */
export interface StoreListeners {
  readonly subscribe: (listener: (event: StoreEvent) => void) => Unsubscribe;
  readonly emit: (event: StoreEvent) => void;
}

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function";

/**
 * A listener that throws — or returns a promise that rejects — is logged and
 * skipped: the write it heard of has committed and stands, the other
 * listeners still hear the event, and nothing escapes as an uncaught
 * exception or an unhandled rejection. Without a logger the failure becomes
 * a process warning (`process.emitWarning`), never a crash.
 */
export function createStoreListeners(log?: ListenerFailureLog): StoreListeners {
  const listeners = new Set<(event: StoreEvent) => void>();
  const report = (err: unknown, event: StoreEvent): void => {
    const message = "store listener failed; the write it was told about stands";
    try {
      if (log !== undefined) log.warn({ err, event: event.kind }, message);
      else process.emitWarning(`okengine: ${message}: ${String(err)}`, { code: "OKE_STORE_LISTENER" });
    } catch {
      // A failing logger must not turn a listener's failure into a crash either.
    }
  };
  return {
    subscribe: (listener) => {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    emit: (event) => {
      for (const listener of [...listeners]) {
        try {
          const out: unknown = listener(event);
          if (isThenable(out)) out.then(undefined, (err: unknown) => report(err, event));
        } catch (err) {
          report(err, event);
        }
      }
    },
  };
}
