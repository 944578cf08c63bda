// app.emit(signal, payload, { id }): an emit with a caller-chosen id enqueues at most one message for that id, so a retried script never doubles work.
import { isOkeError, OkeError } from "../errors.ts";
import type { NewMessage, Store } from "../store/types.ts";
import { emitContext, prepareEmit } from "./emit.ts";
import type { SignalHandle } from "./signal.ts";

export interface EmitOnceHost {
  readonly registry: { subscribers: ReadonlyMap<string, readonly unknown[]> };
  readonly clock: { now(): number };
  readonly store: Pick<Store, "enqueue" | "getMessage">;
  /** The app's enqueue (claim at emit included). */
  enqueue(message: NewMessage): Promise<void>;
}

/** OKE1258: only once signals store a message an id can deduplicate. */
export function checkIdEmit(target: SignalHandle): void {
  if (target.delivery !== "once") {
    throw new OkeError({
      code: "OKE1258",
      status: 500,
      message: `"${target.name}": emit { id } is for once signals; a ${target.delivery} signal stores no message to deduplicate`,
    });
  }
}

/** True for the error a store raises when a message with that id is stored already (every driver). */
export const isDuplicateMessage = (e: unknown): boolean => isOkeError(e) && e.code === "OKE1261";

/**
 * After a duplicate id (OKE1261): an id stored for a message of ANOTHER signal is not this emit's
 * earlier try but an id reused by mistake — resolving would drop this emit without a trace, so it
 * is refused (OKE1263). Ids are one space across signals. A message pruned meanwhile reads as gone:
 * nothing to compare, the emit stands as a duplicate.
 */
export async function checkSameSignal(store: Pick<Store, "getMessage">, message: NewMessage): Promise<void> {
  const stored = await store.getMessage(message.id);
  if (stored === undefined || stored.signal === message.signal) return;
  throw new OkeError({
    code: "OKE1263",
    status: 500,
    message: `"${message.signal}": emit { id: "${message.id}" } reuses the id of a message of "${stored.signal}"; nothing was enqueued`,
    fix: `Message ids are unique across signals: put what the id names in it, e.g. "${message.signal}:${message.id}".`,
  });
}

/**
 * Emits with `options.id` as the message id. A message with that id already
 * stored (OKE1261, on every driver) means an earlier emit with the id
 * committed: nothing is enqueued and the call resolves as that one did. The
 * id is remembered as long as the message is: until it is delivered and
 * pruned after `signals.retentionMs`, or discarded from the dead letters.
 * Inside a caller's transaction (`tx`) the duplicate is thrown instead, since
 * PostgreSQL has already aborted that transaction.
 */
export async function emitOnce<P>(
  host: EmitOnceHost,
  target: SignalHandle<P>,
  payload: P | undefined,
  options: { id: string; key?: string; tx?: unknown },
): Promise<void> {
  checkIdEmit(target);
  const message = await prepareEmit(emitContext(host.registry, host.clock.now()), target, payload, options, {
    flow: "app.emit",
    runId: null,
  });
  try {
    if (options.tx === undefined) await host.enqueue(message);
    else await host.store.enqueue([message], host.clock.now(), { tx: options.tx });
  } catch (e) {
    if (options.tx === undefined && isDuplicateMessage(e)) return checkSameSignal(host.store, message);
    throw e;
  }
}
