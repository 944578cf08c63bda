/**
 * Durable-flow figures:
 *  1. 3-step durable runs per second, invoked in-process, on each driver.
 *  2. 100 000 parked sleepers: heap used, and the boot time of an app (orphan
 *     scan + wake timer) over them, memory and file drivers.
 *
 *   node --import tsx bench/durable.ts [--runs N] [--sleepers N] [--drivers memory,file,postgres]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow } from "../src/index.ts";
import { createFileStore } from "../src/store/file/file-store.ts";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import type { Store } from "../src/store/types.ts";
import { randomName } from "./compare/run-id.ts";

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const RUNS = Number(arg("runs", "2000"));
const SLEEPERS = Number(arg("sleepers", "100000"));
const DRIVERS = arg("drivers", "memory,file,postgres").split(",");
const URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const logger = benchLogger();

const threeSteps = flow("bench.three", {
  durable: true,
  do: async ({ i }: { i: number }, fx) => {
    const a = await fx.step("one", () => i);
    const b = await fx.step("two", () => a + 1);
    return await fx.step("three", () => b + 1);
  },
});
const sleeper = flow("bench.sleeper", {
  durable: true,
  do: async (_: unknown, fx) => {
    await fx.step("before", () => 1);
    await fx.clock.sleep("long", "30d");
  },
});

async function makeStore(
  driver: string,
): Promise<{ store: Store; done: () => Promise<void>; reopen?: () => Store }> {
  if (driver === "memory") {
    const store = createMemoryStore();
    return { store, done: () => store.close() };
  }
  if (driver === "file") {
    const dir = mkdtempSync(join(tmpdir(), "oke-bench-"));
    const store = createFileStore({ dir });
    return {
      store,
      done: async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = randomName("oke_bench_durable");
  const store = createPostgresStore({ connectionString: URL, schema, poolSize: 20 });
  return {
    store,
    done: async () => {
      await store.close();
      const c = new pg.Client({ connectionString: URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    },
  };
}

async function runsPerSecond(driver: string): Promise<void> {
  const { store, done } = await makeStore(driver);
  const app = createApp({
    modules: [{ threeSteps }],
    env: "prod",
    store,
    logger,
    config: { console: { port: false }, database: { url: URL } },
  });
  await app.boot();
  const concurrency = 32;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < RUNS) await app.invoke(threeSteps, { i: next++ });
    }),
  );
  const ms = performance.now() - t0;
  await app.stop();
  await done();
  console.log(
    `3-step durable runs, ${driver.padEnd(8)} ${Math.round(RUNS / (ms / 1000))
      .toLocaleString("en")
      .padStart(8)} runs/s  (${RUNS} runs, 32 at a time)`,
  );
}

async function parkedSleepers(driver: string): Promise<void> {
  const { store, done } = await makeStore(driver);
  const app = createApp({
    modules: [{ sleeper }],
    env: "prod",
    store,
    logger,
    config: { console: { port: false }, database: { url: URL } },
  });
  await app.boot();
  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < SLEEPERS) await app.invoke(sleeper, { i: next++ });
    }),
  );
  const parkMs = performance.now() - t0;
  global.gc?.();
  const heapMb = (process.memoryUsage().heapUsed - heap0) / 1024 / 1024;
  await app.stop();
  // A new app over the same store: boot = open + orphan scan + arming the wake timer.
  const app2 = createApp({
    modules: [{ sleeper }],
    env: "prod",
    store,
    logger,
    config: { console: { port: false }, database: { url: URL } },
  });
  const b0 = performance.now();
  await app2.boot();
  const bootMs = performance.now() - b0;
  await app2.stop();
  await done();
  console.log(
    `${SLEEPERS} parked sleepers, ${driver.padEnd(8)} park ${Math.round(SLEEPERS / (parkMs / 1000)).toLocaleString("en")}/s, heap +${heapMb.toFixed(0)} MB (${((heapMb * 1024 * 1024) / SLEEPERS).toFixed(0)} B/run), boot over them ${bootMs.toFixed(0)} ms`,
  );
}

for (const d of DRIVERS) await runsPerSecond(d);
for (const d of DRIVERS.filter((x) => x !== "postgres")) await parkedSleepers(d);
