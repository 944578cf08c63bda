/** The app's Clock on PostgreSQL: the host clock corrected by FleetTime's measured offset to the database's now(). */
import type { Logger } from "../log/logger.ts";
import type { Clock } from "./clock.ts";
import { FleetTime } from "./fleet-time.ts";

/**
 * Leases, wake-ups, retention and schedules all read this clock, so every
 * instance of a fleet agrees on "now" even when a host clock is off by
 * seconds: a fast host can neither take over a live lease nor wake a sleep
 * early. Timers are armed on the host clock and re-checked on firing, since the
 * offset may move between arming and firing.
 */
export class FleetClock implements Clock {
  private readonly fleet: FleetTime;

  constructor(
    private readonly base: Clock,
    storeTime: () => Promise<number>,
    logger: Logger,
  ) {
    this.fleet = new FleetTime(base, storeTime, logger);
  }

  /** Measures the offset once (boot), then again periodically until stop(). */
  start(): Promise<void> {
    return this.fleet.start();
  }

  stop(): void {
    this.fleet.stop();
  }

  /** ms this host's clock must add to read the database's. */
  offset(): number {
    return this.fleet.offset();
  }

  now(): number {
    return this.base.now() + this.fleet.offset();
  }

  at(at: number, fn: () => void): () => void {
    let cancel: () => void;
    let cancelled = false;
    const arm = (): void => {
      cancel = this.base.at(at - this.fleet.offset(), () => {
        if (cancelled) return;
        // The offset grew since arming (the host fell further behind): not due yet on fleet time.
        if (this.now() < at) arm();
        else fn();
      });
    };
    arm();
    return () => {
      cancelled = true;
      cancel();
    };
  }
}
