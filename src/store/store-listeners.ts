/** The subscriber list every driver shares for store events. */
import type { StoreEvent, Unsubscribe } from "./types.ts";

/** The subscriber list every driver keeps: `subscribe` for the Store, `emit` for the driver. */
export interface StoreListeners {
  readonly subscribe: (listener: (event: StoreEvent) => void) => Unsubscribe;
  readonly emit: (event: StoreEvent) => void;
}

export function createStoreListeners(): StoreListeners {
  const listeners = new Set<(event: StoreEvent) => void>();
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
          listener(event);
        } catch (err) {
          // A broken listener must not undo or fail a committed write; surface it instead.
          queueMicrotask(() => {
            throw err;
          });
        }
      }
    },
  };
}
