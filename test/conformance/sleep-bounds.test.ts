// A sleep whose wake time no Date can hold is refused at the call (OKE1304), nothing journaled, on every driver.
import { describe, expect, it } from "vitest";
import { flow, http, on, type Duration } from "../../src/index.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const post = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };

describe.each(drivers)(
  "a sleep's wake time at the edge of representable time, on the $name driver",
  (driver) => {
    const apps = appFactory(driver);
    const napper = (duration: string) =>
      on(
        http.post("/nap"),
        flow("naps.long", {
          durable: true,
          do: async (_: unknown, fx) => {
            await fx.step("before", () => 1);
            await fx.clock.sleep("nap", duration as Duration);
            return "woke";
          },
        }),
      );

    it("refuses a wake time past the year 275760: the attempt fails with OKE1304 and no sleep is journaled", async () => {
      const app = await apps.make([{ n: napper("200000000000d") }]);
      const res = await app.request("/nap", post);
      expect(res.status).toBe(500);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("OKE1304");
      const [run] = await app.operator.runs({ status: "failed" });
      expect(run!.error).toMatchObject({
        code: "OKE1304",
        message: `journal: sleep "nap" of run "${run!.id}" for "200000000000d" would wake after the latest time a run can wake (+275760-09-13T00:00:00.000Z)`,
      });
      expect((await app.operator.run(run!.id))!.journal.map((e) => e.kind)).toEqual(["step"]);
    });

    it("parks a run whose wake time is the last one a Date can hold", async () => {
      // The app's clock starts at 1 000 000 ms; 99 999 999 days later is still before the limit.
      const app = await apps.make([{ n: napper("99999999d") }]);
      expect((await app.request("/nap", post)).status).toBe(204);
      const [sleeper] = await app.operator.sleepers();
      expect(sleeper).toMatchObject({ label: "nap", wakeAt: 1_000_000 + 99_999_999 * 86_400_000 });
    });
  },
);
