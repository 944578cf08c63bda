/** Fleet time: the store's clock, measured at boot and each minute and advanced by a monotonic clock in between. */
/**
 * Fleet time: the store's (PostgreSQL's) clock, so instances whose host clocks
 * differ agree on leases, wake-ups and due slots. Measured at boot and then
 * once a minute (one stoppable timer). Between measurements it advances by the
 * host's monotonic clock, never by its wall clock: an NTP step of the host
 * clock (Date.now) moves neither fleet time nor a timer armed on it; only the
 * monotonic clock's rate error (ppm) accumulates, and each measurement corrects it.
 */
import type { Logger } from "../log/logger.ts";
import { systemClock, type Clock } from "./clock.ts";

/** Re-measure this often: monotonic clocks drift by ppm, and a database clock steps rarely. */
const RESYNC_MS = 60_000;
const SAMPLES = 5;
/** A measurement that puts fleet time back by at most this holds it still instead (see `adopt`). */
export const MAX_HOLD_MS = 1_000;
/** Longest delay setTimeout accepts; longer waits are re-armed in hops. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Half a second off the whole second nearest `at`: the re-measure's five round
 * trips then never queue on the pool in front of a fire (slots fall on whole
 * seconds and minutes).
 */
const offSecond = (at: number): number => at - (((at % 1_000) + 1_000) % 1_000) + 500;

/** The host clock fleet time advances by between measurements, and timers on it. */
export interface HostTime {
  /** ms from any origin; never steps (performance.now()). */
  monotonic(): number;
  /** Calls `fn` once monotonic() has advanced by `ms`, always asynchronously; returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
}

/** performance.now() and setTimeout: both run on the OS's monotonic clock, whatever Date.now() does. */
export const systemHostTime: HostTime = {
  monotonic: () => performance.now(),
  after(ms, fn) {
    const end = performance.now() + ms;
    let timer: NodeJS.Timeout | undefined;
    const arm = (left: number): void => {
      timer = setTimeout(
        () => {
          const rest = end - performance.now();
          // Only a wait longer than setTimeout's limit comes back with time left.
          if (rest > MAX_TIMER_MS) arm(rest);
          else {
            timer = undefined;
            fn();
          }
        },
        Math.max(0, Math.min(Math.ceil(left), MAX_TIMER_MS)),
      );
      timer.unref();
    };
    arm(ms);
    return () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    };
  },
};

/**
 * The system clock's host time is the monotonic clock. Any other clock (time
 * travel) is its own truth: it is taken as monotonic, so fleet time moves with
 * `advance`/`set` exactly as the clock does.
 */
export const hostTimeOf = (clock: Clock): HostTime =>
  clock === systemClock
    ? systemHostTime
    : { monotonic: () => clock.now(), after: (ms, fn) => clock.at(clock.now() + ms, fn) };

export class FleetTime {
  /** Fleet time at the monotonic instant `anchorMono`: the last measurement, or the host clock before one. */
  private anchorFleet: number;
  private anchorMono: number;
  /** The latest value now() returned: it never returns less (but see `adopt`). */
  private last = -Infinity;
  private cancel: (() => void) | undefined;
  private running = false;
  /** The measurement in progress, if any: stop() sends no round trip after it, settled() waits for it. */
  private measuring: Promise<void> | undefined;
  private warnedAt = 0;

  constructor(
    /** The host's wall clock: fleet time before the first measurement, and what the offset warning compares. */
    private readonly clock: Clock,
    private readonly storeTime: () => Promise<number>,
    private readonly logger: Logger,
    private readonly host: HostTime = hostTimeOf(clock),
  ) {
    this.anchorFleet = clock.now();
    this.anchorMono = host.monotonic();
  }

  /** Epoch ms on the fleet's clock: an integer, never less than a value it returned before (but see `adopt`). */
  now(): number {
    const t = Math.floor(this.anchorFleet + (this.host.monotonic() - this.anchorMono));
    if (t > this.last) this.last = t;
    return this.last;
  }

  /** ms to add to the local (wall) clock to read fleet time, as of now: it changes when the host clock steps. */
  offset(): number {
    return this.now() - this.clock.now();
  }

  /**
   * Calls `fn` once `now() >= at`, on a monotonic timer. Re-checked on firing:
   * a measurement since arming may have put fleet time back.
   */
  at(at: number, fn: () => void): () => void {
    let cancel: () => void;
    let cancelled = false;
    const arm = (): void => {
      cancel = this.host.after(Math.max(0, at - this.now()), () => {
        if (cancelled) return;
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

  async start(): Promise<void> {
    this.running = true;
    await this.remeasure();
  }

  private remeasure(): Promise<void> {
    const p = this.measure().finally(() => {
      if (this.measuring === p) this.measuring = undefined;
    });
    this.measuring = p;
    return p;
  }

  private async measure(): Promise<void> {
    try {
      // The server reads its clock somewhere inside the round trip: take the shortest of a few round
      // trips (the first may include connecting) and assume the middle of it. Round trips are timed on
      // the monotonic clock, so a host clock step during one cannot skew it.
      let best = { rtt: Infinity, server: 0, mid: 0, offset: 0 };
      for (let i = 0; i < SAMPLES; i++) {
        // Stopped meanwhile: the store may be closing, so no further round trip goes out, and the
        // partial measurement is dropped (a clock about to stop need not move).
        if (!this.running) return;
        const before = this.host.monotonic();
        const server = await this.storeTime();
        const after = this.host.monotonic();
        // The host clock's offset, for the warning: its reading at the middle of the round trip.
        const wall = this.clock.now() - (after - before) / 2;
        if (after - before < best.rtt)
          best = { rtt: after - before, server, mid: (before + after) / 2, offset: server - wall };
      }
      // Within the round trip's uncertainty the clocks agree: fleet time is the host clock as of this
      // instant rather than noise (and, the wall read before the monotonic one, never ahead of Date.now()).
      const agree = Math.abs(best.offset) <= best.rtt / 2 + 2;
      const next = agree ? 0 : Math.round(best.offset);
      // Say so once, and again when it moved by more than a second.
      if (Math.abs(next) > 1_000 && Math.abs(next - this.warnedAt) > 1_000) {
        this.warnedAt = next;
        this.logger.warn(
          { offsetMs: next },
          `clock: this host's clock is ${next} ms off the database's; leases, wake-ups and schedules use the database's (fix the host's NTP)`,
        );
      }
      if (agree) this.adopt(this.clock.now(), this.host.monotonic());
      else this.adopt(best.server, best.mid);
    } catch (e) {
      // A read failing after stop is the store closing under it: nothing to report.
      if (this.running)
        this.logger.warn(
          { err: e },
          "clock: could not read the database's time; keeping the last measurement",
        );
    }
    if (this.running)
      this.cancel = this.at(offSecond(this.now() + RESYNC_MS), () => {
        void this.remeasure();
      });
  }

  /**
   * Fleet time is `fleet` at the monotonic instant `mono` from now on. A
   * measurement that would put it back by a few ms (the monotonic clock ran
   * fast, or round-trip noise) holds it still until it catches up instead: a
   * lease seen expired must not look live again a moment later, and ids and
   * journal timestamps this instance writes stay ordered. Back by more than
   * MAX_HOLD_MS means the database's clock itself stepped back (or the first
   * measurement after booting without the database found this host fast):
   * holding would stall every lease renewal, wake-up and schedule of this
   * instance that long, so fleet time goes back, and says so. Going back is the
   * safe direction for leases: it only makes other instances' leases look longer.
   */
  private adopt(fleet: number, mono: number): void {
    const was = this.now();
    this.anchorFleet = fleet;
    this.anchorMono = mono;
    const back = was - Math.floor(fleet + (this.host.monotonic() - mono));
    if (back > MAX_HOLD_MS) {
      this.last = -Infinity;
      this.logger.warn({ backMs: back }, `clock: fleet time moved back ${back} ms to the database's clock`);
    }
  }

  /** Ends re-measuring: no round trip goes out after this; a measurement in progress ends at its current one (settled()). */
  stop(): void {
    this.running = false;
    this.cancel?.();
  }

  /** Resolves once the measurement in progress, if any, has ended: no storeTime() call is out then. */
  settled(): Promise<void> {
    return this.measuring ?? Promise.resolve();
  }
}
