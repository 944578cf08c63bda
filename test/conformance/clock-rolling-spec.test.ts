// A rolling deploy that changes a clock's spec: the last boot sets it for the fleet, and an instance whose code declares another spec says so, once, in its log, its Console and `oke schedules`.
import { describe, expect, it } from "vitest";
import { clock, flow, on, type ClockInput } from "../../src/index.ts";
import type { Duration } from "../../src/clock/duration.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { oke } from "../../src/cli/run-oke.test-helper.ts";
import { appFactory, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const utc = (s: string): number => Date.parse(s);
const TOKEN = "alice-secret-0123456789";

/** Both versions' warning: what this instance's code declares against what the store holds. */
const elsewhere = (stored: string, code: string): string =>
  `the store has every ${stored}, declared by another instance's code (a different version of the app); ` +
  `this instance's code declares every ${code}. The stored every ${stored} fires now, on every instance: ` +
  `the last instance to boot sets a clock's spec for the whole fleet; finish the deploy, or restart this ` +
  `instance to make its code's spec current`;

const warnings = (records: Array<Record<string, unknown>>) =>
  records.filter((r) => r.level === 40 && String(r.msg).includes("declared by another instance's code"));

describe.each(drivers)("a clock's spec across a rolling deploy on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("an old instance restarting mid-deploy sets its spec for the fleet: the new one warns once, shows both specs, and every slot fires once", async () => {
    const log: ClockInput[] = [];
    const ticks = (every: Duration) => ({
      tick: on(
        clock("ticks.tick", { every }),
        flow("ticks.tick", {
          do: (input: ClockInput) => {
            log.push(input);
          },
        }),
      ),
    });
    const store = await apps.store();
    const time = createTimeTravel(utc("2026-05-01T11:00:05Z"));
    const v1Log = recordingLogger();
    const v2Log = recordingLogger();
    const v1RestartLog = recordingLogger();

    const v1 = await apps.make([ticks("10s")], { store, time, logger: v1Log.logger });
    const v2 = await apps.make([ticks("20s")], {
      store,
      time,
      logger: v2Log.logger,
      boot: false,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const url = (await v2.start({ port: 0, host: "127.0.0.1" })).console!.url;
    // v2 booted last: v1, still live, fires v2's spec and says so.
    await until(() => warnings(v1Log.records).length === 1, "v1 warns about v2's spec");
    expect(warnings(v1Log.records)[0]).toMatchObject({
      clock: "ticks.tick",
      stored: { cron: null, every: "20s", timezone: "UTC" },
      declared: { cron: null, every: "10s", timezone: "UTC" },
      firing: { cron: null, every: "20s", timezone: "UTC" },
      msg: `clock "ticks.tick": ${elsewhere("20s", "10s")}`,
    });

    // v1 restarts while v2 is live: its boot stores v1's spec again, and v2 hears of it.
    await v1.stop();
    const v1b = await apps.make([ticks("10s")], { store, time, logger: v1RestartLog.logger });
    await until(() => warnings(v2Log.records).length === 1, "v2 warns about v1's spec");
    expect(warnings(v2Log.records)[0]).toMatchObject({
      clock: "ticks.tick",
      stored: { cron: null, every: "10s", timezone: "UTC" },
      declared: { cron: null, every: "20s", timezone: "UTC" },
      firing: { cron: null, every: "10s", timezone: "UTC" },
      msg: `clock "ticks.tick": ${elsewhere("10s", "20s")}`,
    });
    expect(warnings(v1RestartLog.records)).toEqual([]);

    // Both live, both firing the stored 10 s spec: each slot once, whoever wins it (the loser re-reads).
    const fired = () => log.map((x) => x.scheduledAt);
    const slots = ["11:00:10", "11:00:20", "11:00:30", "11:00:40", "11:00:50", "11:01:00"].map((t) =>
      utc(`2026-05-01T${t}Z`),
    );
    time.advance("5s");
    await until(() => fired().length === 1, "11:00:10 fired");
    for (const n of [2, 3]) {
      time.advance("10s");
      await until(() => fired().length === n, `slot ${n} fired`);
    }
    await Promise.all([v1b.idle(), v2.idle()]);
    // Another instance's pause and resume: store wakes, on which v2 reads the schedules again (as a
    // follower does on every slot). Still the same stored spec: no second warning.
    const versionBefore = (await store.getSchedule("ticks.tick"))!.version;
    await v1b.operator.schedules.pause("ticks.tick");
    await v1b.operator.schedules.resume("ticks.tick");
    await until(
      async () => (await store.getSchedule("ticks.tick"))!.version === versionBefore + 2,
      "paused and resumed",
    );
    // The restarted v1 declares what the store holds: no note on its side.
    expect(await v1b.operator.schedules.get("ticks.tick")).toMatchObject({
      every: "10s",
      declared: { cron: null, every: "10s", timezone: "UTC" },
      declaredElsewhere: null,
      declaredElsewhereNote: null,
    });

    // v1 is gone: v2 alone goes on firing v1's spec (the last boot's) until it reboots itself.
    await v1b.stop();
    for (const n of [4, 5, 6]) {
      time.advance("10s");
      await until(() => fired().length === n, `slot ${n} fired`);
    }
    await v2.idle();
    expect(fired()).toEqual(slots);
    // One warning for the pair, however many times v2 re-read the schedules since.
    expect(warnings(v2Log.records)).toHaveLength(1);
    expect(warnings(v1RestartLog.records)).toEqual([]);

    // What v2's operators see: its own code's declaration, and the other one the store holds.
    const expected = {
      name: "ticks.tick",
      every: "10s",
      overridden: false,
      declared: { cron: null, every: "20s", timezone: "UTC" },
      declaredElsewhere: { cron: null, every: "10s", timezone: "UTC" },
      declaredElsewhereNote: elsewhere("10s", "20s"),
    };
    expect(await v2.operator.schedules.get("ticks.tick")).toMatchObject(expected);
    const res = await fetch(`${url}/api/schedules`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { schedules: unknown[] };
    expect(body.schedules).toEqual([expect.objectContaining(expected)]);

    const cli = await oke("schedules", "--url", url, "--token", TOKEN);
    expect(cli.code).toBe(0);
    const lines = cli.stdout.split("\n");
    expect(lines[1]!.trim().split(/ {2,}/).slice(0, 5)).toEqual([
      "ticks.tick",
      "ticks.tick",
      "every 10s (other version)",
      "-",
      "active",
    ]);
    expect(lines.at(-1)).toBe(`note: ticks.tick: ${elsewhere("10s", "20s")}`);
  });
});
