import type { Clock } from "../clock/clock.ts";
import type { JournalSession } from "../durable/session.ts";
import type { BroadcastSignal, LiveSignal } from "../signal/signal.ts";
import type { AnyFlow } from "../flow/flow.ts";
import type { SendDrivers } from "../fx/send.ts";
import type { Logger } from "../log/logger.ts";
import type { NewMessage, Store } from "../store/types.ts";
import type { ResolvedConfig } from "./config.ts";
import type { Registry } from "./manifest.ts";
import type { InvokeResult } from "./types.ts";

/** What fx and the runtimes share inside one app. Internal. */
export interface Runtime {
  readonly registry: Registry;
  readonly store: Store;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly config: ResolvedConfig;
  readonly send: SendDrivers;
  /** Holder id for claims and leases: unique per app instance. */
  readonly instanceId: string;
  /** Runs a flow as fx.call / app.invoke do: checks `in`, durable flows get their own run. */
  call(
    flow: AnyFlow,
    input: unknown,
    parent: { runId: string | null; flow: string | null },
  ): Promise<InvokeResult>;
  /**
   * Commits one emitted once message (outside a durable journal), handing it
   * straight to this instance's worker pool when claim at emit applies.
   */
  enqueue(message: NewMessage): Promise<void>;
  /** Emits a broadcast (per-flow copies across the fleet) or appends to a live tape; resolves once committed. */
  emitFanout(
    target: BroadcastSignal | LiveSignal,
    payload: unknown,
    options: { key?: string | undefined; tx?: unknown } | undefined,
    producer: { flow: string; runId: string | null },
    session?: JournalSession,
  ): Promise<void>;
}
