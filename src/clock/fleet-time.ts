/** Fleet time: the offset between this host's clock and the store's, so every instance agrees on due slots. */
/**
 * Fleet time for schedules: the offset between this host's clock and the
 * store's (PostgreSQL's), so instances whose clocks differ agree on which slot
 * is due and a fast host never fires a slot early. Measured at boot and then
 * once a minute (one stoppable timer).
 */
import type { Logger } from "../log/logger.ts";
import type { Clock } from "./clock.ts";

/** Re-measure this often: host clocks drift slowly, NTP steps are rare. */
const RESYNC_MS = 60_000;
const SAMPLES = 5;

/**
 * Half a second off the whole second nearest `at`: the re-measure's five round
 * trips then never queue on the pool in front of a fire (slots fall on whole
 * seconds and minutes).
 */
const offSecond = (at: number): number => at - (((at % 1_000) + 1_000) % 1_000) + 500;

export class FleetTime {
  private offsetMs = 0;
  private cancel: (() => void) | undefined;
  private running = false;
  private warnedAt = 0;

  constructor(
    private readonly clock: Clock,
    private readonly storeTime: () => Promise<number>,
    private readonly logger: Logger,
  ) {}

  /** ms to add to the local clock to read fleet time. */
  offset(): number {
    return this.offsetMs;
  }

  async start(): Promise<void> {
    this.running = true;
    await this.measure();
  }

  private async measure(): Promise<void> {
    try {
      // The server reads its clock somewhere inside the round trip: take the shortest of a few round
      // trips (the first may include connecting) and assume the middle of it.
      let best = { rtt: Infinity, offset: 0 };
      for (let i = 0; i < SAMPLES; i++) {
        const before = this.clock.now();
        const server = await this.storeTime();
        const after = this.clock.now();
        if (after - before < best.rtt) best = { rtt: after - before, offset: server - (before + after) / 2 };
      }
      // Within the round trip's uncertainty the clocks agree: keep 0 rather than noise.
      const next = Math.abs(best.offset) <= best.rtt / 2 + 2 ? 0 : Math.round(best.offset);
      // Say so once, and again when it moved by more than a second.
      if (Math.abs(next) > 1_000 && Math.abs(next - this.warnedAt) > 1_000) {
        this.warnedAt = next;
        this.logger.warn(
          { offsetMs: Math.round(next) },
          `clock: this host's clock is ${Math.round(next)} ms off the database's; leases, wake-ups and schedules use the database's (fix the host's NTP)`,
        );
      }
      this.offsetMs = next;
    } catch (e) {
      this.logger.warn({ err: e }, "clock: could not read the database's time; keeping the last offset");
    }
    if (this.running)
      this.cancel = this.clock.at(offSecond(this.clock.now() + RESYNC_MS), () => {
        void this.measure();
      });
  }

  stop(): void {
    this.running = false;
    this.cancel?.();
  }
}
