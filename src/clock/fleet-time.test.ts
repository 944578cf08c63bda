// FleetTime.stop: a measurement in progress sends no further round trip, logs no failure, and settled() waits for it.
import { describe, expect, it } from "vitest";
import { gate, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { FleetTime } from "./fleet-time.ts";
import { createTimeTravel } from "./time-travel.ts";

const T0 = 1_800_000_000_000;

/**
 * Fleet time over time travel whose second storeTime() round trip (of the five a measurement takes)
 * is held until the test opens it; `closed` makes every later one fail, as a closed store does.
 */
function rig() {
  const time = createTimeTravel(T0);
  const { logger, records } = recordingLogger();
  const s = { reads: 0, waiting: false, closed: false, second: gate() };
  const storeTime = async (): Promise<number> => {
    s.reads++;
    if (s.closed) throw new Error("store closed");
    if (s.reads === 2) {
      s.waiting = true;
      await s.second.promise;
    }
    return time.now();
  };
  const fleet = new FleetTime(time, storeTime, logger);
  return { time, records, s, fleet };
}

describe("FleetTime.stop", () => {
  it("a stop during a measurement sends no further storeTime round trip, logs no failure, and arms no re-measure", async () => {
    const { time, records, s, fleet } = rig();
    const starting = fleet.start();
    await until(() => s.waiting, "the second round trip");
    fleet.stop();
    s.closed = true;
    s.second.open();
    await starting;
    time.advance("5m");
    await new Promise((r) => setImmediate(r));

    expect(s.reads).toBe(2);
    expect(records.filter((r) => r.level === 40)).toEqual([]);
  });

  it("settled() resolves only once the round trip out at stop has answered", async () => {
    const { s, fleet } = rig();
    const starting = fleet.start();
    await until(() => s.waiting, "the second round trip");
    fleet.stop();
    let settled = false;
    const settling = fleet.settled().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    s.second.open();
    await settling;
    await starting;
    expect(s.reads).toBe(2);
  });
});
