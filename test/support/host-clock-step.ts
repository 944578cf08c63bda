// Test helper: steps the host's wall clock (Date.now) as NTP would, leaving the monotonic clock (performance.now, timers) alone.
import { vi } from "vitest";

/** The unmocked wall clock, bound before any test replaces Date.now. */
const realNow = Date.now.bind(Date);

/** `until` with no timer of its own but setTimeout, which runs on the monotonic clock whatever Date.now() says. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * From the call on, every Date.now() of this process reads the real wall clock plus the
 * current step (0 until `step` is called), until `vi.restoreAllMocks()` (the caller's
 * afterEach). `new Date()` and performance.now() are not touched: only what reads Date.now()
 * sees the step.
 */
export function hostClockSteps(): { step(ms: number): void; wall(): number } {
  let offset = 0;
  vi.spyOn(Date, "now").mockImplementation(() => realNow() + offset);
  return {
    /** The host clock now reads `ms` off the real time (a step of +40 s: 40_000). */
    step: (ms) => void (offset = ms),
    /** The real wall clock. */
    wall: realNow,
  };
}
