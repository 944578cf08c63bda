// The health monitor's outage length is measured on the monotonic clock: a host clock step during an outage does not skew it.
import { afterEach, describe, expect, it, vi } from "vitest";
import { gate } from "../../test/conformance/app-fixture.ts";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createHealthMonitor } from "./store-health.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("health monitor and host clock steps", () => {
  it("says how long the store was down, not that plus a 40 s step of the host clock", async () => {
    const clock = hostClockSteps();
    const back = gate<{ downMs: number }>();
    const outage = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const monitor = createHealthMonitor({
      name: "test",
      probe: () => Promise.resolve(),
      isOutage: () => true,
      minDelayMs: 10,
      logger: {
        warn: () => undefined,
        info: (obj) => back.open(obj as { downMs: number }),
      },
    });
    try {
      const before = clock.wall();
      monitor.failed(outage);
      const down = monitor.health();
      // `since` is the wall clock's reading: the host's clock as it was.
      expect(down.ok === false && down.since >= before).toBe(true);
      clock.step(40_000);
      const { downMs } = await within(back.promise, 15_000, "the probe");
      expect(monitor.health()).toEqual({ ok: true });
      expect(downMs).toBeGreaterThanOrEqual(0);
      expect(downMs).toBeLessThan(15_000);
    } finally {
      monitor.stop();
    }
  });
});
