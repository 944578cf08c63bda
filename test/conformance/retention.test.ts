// Finished durable runs and their journals are pruned after durable.retentionMs, on every driver; live runs stay.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow } from "../../src/index.ts";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const DAY = 86_400_000;

const done = flow("ret.done", { durable: true, do: async (_: unknown, fx) => fx.step("s", () => 1) });
const boom = flow("ret.boom", {
  durable: true,
  do: async (_: unknown, fx) => {
    await fx.step("s", () => 1);
    throw new Error("boom");
  },
});
const nap = flow("ret.nap", {
  durable: true,
  do: async (_: unknown, fx) => {
    await fx.step("s", () => 1);
    await fx.clock.sleep("long", "30d");
  },
});
const modules = [{ done, boom, nap }];
const config = { durable: { retentionMs: DAY } };

for (const driver of drivers) {
  describe(`durable retention (${driver.name})`, () => {
    const apps = appFactory(driver);

    it("completed and failed runs leave with their journals after durable.retentionMs; sleeping runs stay", async () => {
      const app = await apps.make(modules, { config });
      for (let i = 0; i < 3; i++) await app.invoke(done, {});
      await expect(app.invoke(boom, {})).rejects.toThrow("boom");
      await app.invoke(nap, {});
      const finished = [
        ...(await app.operator.runs({ status: "completed" })),
        ...(await app.operator.runs({ status: "failed" })),
      ];
      expect(finished).toHaveLength(4);
      const sleeping = await app.operator.runs({ status: "sleeping" });
      expect(sleeping).toHaveLength(1);

      // Not yet: retention counts from the run's last update.
      app.time.advance(DAY - 3_600_000);
      await new Promise((r) => setImmediate(r));
      expect(await app.operator.runs({ status: "completed" })).toHaveLength(3);

      app.time.advance(2 * 3_600_000);
      await until(
        async () => (await app.operator.runs({ status: "completed" })).length === 0,
        "completed runs pruned",
      );
      await until(
        async () => (await app.operator.runs({ status: "failed" })).length === 0,
        "failed runs pruned",
      );
      for (const r of finished) expect(await app.operator.run(r.id)).toBeUndefined();
      expect(await app.operator.run(sleeping[0]!.id)).toMatchObject({ run: { status: "sleeping" } });
    });
  });
}

describe("durable retention (file driver state)", () => {
  it("pruned runs leave memory, the log replay and the next snapshot", async () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-ret-"));
    try {
      const time = createTimeTravel(1_000_000);
      const store = createFileStore({ dir });
      const app = createApp({ modules, env: "test", clock: time, store, config });
      await app.boot();
      for (let i = 0; i < 50; i++) await app.invoke(done, {});
      await app.invoke(nap, {});
      time.advance(DAY + 3_600_000);
      await until(async () => (await app.operator.runs({})).length === 1, "finished runs pruned");
      await app.stop({ timeoutMs: 2_000 });
      await store.close();

      // The log replays the prune: only the sleeper comes back.
      const again = createFileStore({ dir });
      await again.open();
      expect((await again.listRuns({})).map((r) => r.status)).toEqual(["sleeping"]);
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
