/** The bound on a durable run's recoveries (`durable.maxRecoveries`), the failure a poison run ends with, and the log line of each takeover. */
import type { Logger } from "../log/logger.ts";
import type { RunRecord } from "../store/types.ts";

/** The code of a run ended because it was recovered more often than `durable.maxRecoveries` allows. */
export const RECOVERIES_EXCEEDED = "OKE1303";

/**
 * The failure of a run past the bound: its holder died or hung past its lease more often than
 * `maxRecoveries` allows (a poison run: a step that kills or wedges every process that runs it).
 * Undefined while the run is within it.
 */
export function recoveriesExceeded(
  run: Pick<RunRecord, "id" | "flow" | "recoveries">,
  maxRecoveries: number,
): { code: typeof RECOVERIES_EXCEEDED; message: string } | undefined {
  if (run.recoveries <= maxRecoveries) return undefined;
  return {
    code: RECOVERIES_EXCEEDED,
    message:
      `journal: run "${run.id}" (${run.flow}) was recovered ${run.recoveries} times, ` +
      `more than durable.maxRecoveries (${maxRecoveries}); ended without running again`,
  };
}

/** Takeovers a window logs one line each; more are summed up in one line at the window's end. */
export const TAKEOVER_LINES = 20;

/** The window TAKEOVER_LINES counts in (monotonic ms). */
export const TAKEOVER_WINDOW_MS = 10_000;

/**
 * The info line of each run taken over after its holder's lease lapsed (a recovery: the store's take
 * said whom from). Up to TAKEOVER_LINES a window get a line each, with the run, its flow, the
 * previous holder and the count; past that the rest of the window is one line — how many, the first
 * ids and holders — and so is each window right after one that overflowed, until a window passes
 * without: an instance taking over a dead one's 10 000 runs writes 20 lines, then one per window.
 */
export class TakeoverLog {
  private windowEnds = -Infinity;
  private lines = 0;
  /** The window now open held takeovers back (its summary may have been written already). */
  private overflowed = false;
  private more: { count: number; runIds: string[]; holders: Set<string> } | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly maxRecoveries: number | undefined,
  ) {}

  /** A take of `run` that counted a recovery, from holder `from`. */
  note(run: Pick<RunRecord, "id" | "flow" | "recoveries">, from: string): void {
    const now = performance.now();
    if (now >= this.windowEnds) {
      this.flush();
      // Right after a window that overflowed, the takeover goes on: summed up from its first run.
      this.lines = this.overflowed && now < this.windowEnds + TAKEOVER_WINDOW_MS ? TAKEOVER_LINES : 0;
      this.overflowed = false;
      this.windowEnds = now + TAKEOVER_WINDOW_MS;
    }
    if (this.lines < TAKEOVER_LINES) {
      this.lines++;
      const max = this.maxRecoveries;
      this.logger.info(
        {
          runId: run.id,
          flow: run.flow,
          previousHolder: from,
          recoveries: run.recoveries,
          ...(max === undefined || max === Infinity ? {} : { maxRecoveries: max }),
        },
        `durable run "${run.id}" (${run.flow}) taken over from ${from}, whose lease lapsed: recovery ${run.recoveries}` +
          (max === undefined || max === Infinity ? "" : ` of at most ${max} (durable.maxRecoveries)`),
      );
      return;
    }
    this.overflowed = true;
    const more = (this.more ??= { count: 0, runIds: [], holders: new Set() });
    more.count++;
    if (more.runIds.length < TAKEOVER_LINES) more.runIds.push(run.id);
    if (more.holders.size < TAKEOVER_LINES) more.holders.add(from);
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), Math.max(0, this.windowEnds - now));
      this.timer.unref();
    }
  }

  /** Writes the summary line of the takeovers held back, if any (at the window's end, and at stop). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const more = this.more;
    this.more = undefined;
    if (more === undefined) return;
    this.logger.info(
      {
        count: more.count,
        runIds: more.runIds,
        previousHolders: [...more.holders],
        ...(this.maxRecoveries === undefined || this.maxRecoveries === Infinity
          ? {}
          : { maxRecoveries: this.maxRecoveries }),
      },
      `durable: ${more.count} more run(s) taken over from lapsed leases (logged one line each up to ${TAKEOVER_LINES} per ${TAKEOVER_WINDOW_MS / 1000} s); first ids: ${more.runIds.join(", ")}`,
    );
  }
}
