/**
 * S13 sleepers at scale, per okengine driver: bench/sleepers.ts in a child process (its heap holds
 * nothing but the app and the store), which seeds N parked runs and reports memory per parked run,
 * boot to ready and the rate at which the due ones resume under durable.concurrency.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { SleepersFigures } from "../sleepers.ts";
import { DATABASE_URL } from "./env.ts";
import type { Figure, Sizes } from "./types.ts";

export const S13_DRIVERS = ["memory", "file", "postgres"] as const;

export function s13(driver: (typeof S13_DRIVERS)[number], sizes: Sizes): Figure[] {
  const script = fileURLToPath(new URL("../sleepers.ts", import.meta.url));
  const r = spawnSync(
    process.execPath,
    [
      "--expose-gc",
      "--max-old-space-size=8192",
      "--import",
      "tsx",
      script,
      "--driver",
      driver,
      "--runs",
      String(sizes.s13Runs),
      "--due",
      String(sizes.s13Due),
      "--json",
    ],
    // Its stderr (warnings and errors of the app) goes straight to this process's stderr.
    {
      encoding: "utf8",
      env: { ...process.env, DATABASE_URL },
      maxBuffer: 1 << 20,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const line = r.stdout.trim().split("\n").at(-1) ?? "";
  if (r.status !== 0 || !line.startsWith("{"))
    throw new Error(
      `bench/sleepers.ts exited ${r.status ?? r.signal} (its stderr is above): ${r.stdout.slice(-300)}`,
    );
  const f = JSON.parse(line) as SleepersFigures;
  const system = `okengine-${driver}`;
  const n = f.runs.toLocaleString("en-US").replace(/,/g, " ");
  const fig = (metric: string, unit: string, better: Figure["better"], value: number): Figure => ({
    scenario: "S13",
    metric,
    unit,
    better,
    system,
    value,
    samples: [value],
  });
  return [
    fig(`boot to ready, ${n} parked`, "ms", "lower", f.bootMs),
    fig("heap per parked run", "B", "lower", f.heapBytesPerRun),
    fig("RSS per parked run", "B", "lower", f.rssBytesPerRun),
    {
      ...fig(
        `resume ${f.due.toLocaleString("en-US").replace(/,/g, " ")} due, concurrency ${f.concurrency}`,
        "runs/s",
        "higher",
        f.resumePerSecond,
      ),
      ...(f.tableBytes === undefined
        ? {}
        : { note: `tables + indexes ${Math.round(f.tableBytes / f.runs)} B per run on disk` }),
    },
  ];
}
