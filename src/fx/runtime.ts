/** What an fx needs from the app it runs in: the narrow interface the runtimes implement, so fx never imports app/. */
import type { Clock } from "../clock/clock.ts";
import type { JournalSession } from "../durable/session.ts";
import type { AnyFlow, InvokeResult } from "../flow/flow.ts";
import type { BroadcastSignal, LiveSignal } from "../signal/signal.ts";
import type { Logger } from "../log/logger.ts";
import type { NewMessage, Store } from "../store/types.ts";
import type { SendDrivers } from "./send.ts";

/** The parts of an app's registry fx reads. */
export interface FxRegistry {
  /** A flow handle → the named flow the app adopted (exports are named at boot). */
  readonly named: ReadonlyMap<AnyFlow, AnyFlow>;
  /** Signal name → the flows bound to it. */
  readonly subscribers: ReadonlyMap<string, readonly AnyFlow[]>;
}

/** What fx and the runtimes share inside one app. Internal. */
export interface FxRuntime {
  /** dev and test warn about likely mistakes (sleep-guards.ts); prod stays quiet. */
  readonly env: "dev" | "test" | "prod";
  readonly registry: FxRegistry;
  readonly store: Store;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly send: SendDrivers;
  /** Runs a flow as fx.call / app.invoke do: checks `in`, durable flows get their own run. */
  call(
    flow: AnyFlow,
    input: unknown,
    parent: { runId: string | null; flow: string | null; childRunId?: string | undefined },
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
    options: { key?: string | undefined; id?: string | undefined; tx?: unknown } | undefined,
    producer: { flow: string; runId: string | null },
    session?: JournalSession,
  ): Promise<void>;
}
