/** The app's Clock on PostgreSQL: the database's clock, advanced by the host's monotonic clock between measurements. */
import type { Logger } from "../log/logger.ts";
import type { Clock } from "./clock.ts";
import { FleetTime, type HostTime } from "./fleet-time.ts";

/**
 * Leases, wake-ups, retention and schedules all read this clock, so every
 * instance of a fleet agrees on "now" even when a host clock is off by
 * seconds or steps while the app runs: a fast host can neither take over a
 * live lease nor wake a sleep early, and a slow one writes no lease that is
 * already expired. now() is the database's time at the last measurement plus
 * the monotonic time since; timers run on the monotonic clock too and are
 * re-checked on firing, since a measurement may move fleet time between arming
 * and firing. `host` replaces the monotonic clock in tests (by default
 * performance.now() under the system clock, the clock itself otherwise).
 */
export class FleetClock implements Clock {
  private readonly fleet: FleetTime;

  constructor(base: Clock, storeTime: () => Promise<number>, logger: Logger, host?: HostTime) {
    this.fleet = new FleetTime(base, storeTime, logger, host);
  }

  /** Measures the database's time once (boot), then again periodically until stop(). */
  start(): Promise<void> {
    return this.fleet.start();
  }

  /** Ends re-measuring; settled() resolves once a measurement in progress has ended. */
  stop(): void {
    this.fleet.stop();
  }

  /** Resolves when no read of the database's time is out (await it after stop(), before closing the store). */
  settled(): Promise<void> {
    return this.fleet.settled();
  }

  /** ms this host's clock must add to read the database's, as of now. */
  offset(): number {
    return this.fleet.offset();
  }

  now(): number {
    return this.fleet.now();
  }

  at(at: number, fn: () => void): () => void {
    return this.fleet.at(at, fn);
  }
}
