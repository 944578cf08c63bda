// Types the durable runner, its compensation and its log share: what driveRun needs and what it reports.
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import type { OkeError } from "../errors.ts";
import type { Store } from "../store/types.ts";
import type { MismatchLog } from "./mismatch-log.ts";

export type DurableOutcome =
  | { kind: "completed"; runId: string; value: unknown }
  | {
      kind: "parked";
      runId: string;
      wakeAt: number;
      /**
       * Not a sleep: the journal no longer matches the code (OKE1301), so the run was released to be
       * tried again at `wakeAt` (runner.ts `blocked`), neither failed nor compensated.
       */
      blocked?: OkeError;
    }
  | {
      kind: "failed";
      runId: string;
      error: unknown;
      /** The run was released for another attempt, not finished. */ retry: boolean;
    };

export interface DurableDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /**
   * A fresh lease-holder token for each acquisition (`<instance>/<n>`): two
   * code paths of one instance must never both believe they hold a run.
   */
  nextOwner(): string;
  leaseMs: number;
  /** Aborted at the stop deadline: journal writes still retrying are given up. */
  abort?: AbortSignal | undefined;
  /** Where runs held back by a journal mismatch are reported (OKE1301; runner.ts `blocked`). */
  mismatches: MismatchLog;
}

/** Compensations registered by fx.step(…, { undo }) during this attempt. */
export type UndoList = Array<{ name: string; run: () => Promise<void> | void }>;
