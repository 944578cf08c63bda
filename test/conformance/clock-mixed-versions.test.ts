// A fleet running two versions of the code: an instance booting without a clock another live instance declares does not stop it fleet-wide.
import { describe, expect, it } from "vitest";
import { every, flow, on, type ClockInput } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { appFactory, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const utc = (s: string): number => Date.parse(s);

describe.each(drivers)("clocks across code versions on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("an instance that does not declare a clock orphans it at boot; a live instance that declares it takes it back, and it fires on", async () => {
    const log: ClockInput[] = [];
    const ticks = (name: string) =>
      on(
        every("1m"),
        flow(name, {
          do: (input: ClockInput) => {
            log.push(input);
          },
        }),
      );
    const store = await apps.store();
    const time = createTimeTravel(utc("2026-05-01T10:59:30Z"));
    const { logger, records } = recordingLogger();
    // The newer code declares both clocks; the older one only the first.
    const newer = await apps.make([{ a: ticks("ticks.a"), b: ticks("ticks.b") }], { store, time, logger });
    await apps.make([{ a: ticks("ticks.a") }], { store, time });
    // The older instance's boot marked ticks.b orphaned; the newer one hears of it and takes it back.
    await until(
      async () =>
        (await store.getSchedule("ticks.b"))?.orphaned === false &&
        records.some((r) => String(r.msg).includes("takes it back")),
      "ticks.b taken back",
    );
    expect(records.find((r) => String(r.msg).includes("takes it back"))).toMatchObject({
      level: 30,
      clocks: ["ticks.b"],
      msg: 'clock "ticks.b" was marked orphaned by an instance that does not declare it; declared here, so this instance takes it back',
    });
    time.advance("30s");
    await until(() => log.filter((x) => x.clock === "ticks.b").length === 1, "ticks.b fires at 11:00");
    await newer.idle();
    expect(log.filter((x) => x.clock === "ticks.b").map((x) => x.scheduledAt)).toEqual([
      utc("2026-05-01T11:00:00Z"),
    ]);
    // Operators can still act on it from the instance that declares it.
    await expect(newer.operator.schedules.trigger("ticks.b")).resolves.toBeDefined();
  });
});
