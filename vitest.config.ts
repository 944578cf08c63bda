import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

import { availableParallelism } from "node:os";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL(".", import.meta.url));

/**
 * The longest files, longest first (seconds each, 2 workers on 2 cores, 2026-12-04). Without
 * vitest's cache of earlier durations (a clean CI clone) files start largest first, and the
 * conformance files are small: the PostgreSQL one (76 s, since split in two) started last and was
 * the run's 80 s tail (605 s wall for 1 030 s of file time). Started first, the long ones overlap
 * the many short ones instead.
 */
const LONGEST = [
  "test/package.test.ts", // 90
  "src/cli/cli.test.ts", // 75 (operator commands in-process since: the rest start real processes)
  "test/process/clock-skew.test.ts", // 50
  "test/docs-examples.test.ts", // 45
  "test/process/chaos.test.ts", // 43
  "src/store/postgres/postgres-store.test.ts", // 38
  "src/store/postgres/postgres-store-poll.test.ts", // 38
  "test/process/durable-chaos.test.ts", // 28
  "src/console/console-api.test.ts", // 28
  "test/process/clock-processes.test.ts", // 28
  "test/process/postgres-processes.test.ts", // 24
];

/** Vitest's order (failed first, then longest known), with LONGEST ahead of everything else. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification): number => {
      const i = LONGEST.indexOf(relative(ROOT, f.moduleId).split("\\").join("/"));
      return i === -1 ? LONGEST.length : i;
    };
    return (await super.sort(files))
      .map((f, i) => ({ f, i, r: rank(f) }))
      .sort((a, b) => a.r - b.r || a.i - b.i)
      .map((x) => x.f);
  }
}

export default defineConfig({
  resolve: {
    // Lets test/example-app.test.ts import the example app's files in-process.
    alias: [
      { find: /^@\/(.*)$/, replacement: fileURLToPath(new URL("./examples/shop/src/$1", import.meta.url)) },
      { find: /^okengine$/, replacement: fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
    ],
  },
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    // Real PostgreSQL and real child processes: give them room, but never sleep in tests.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Three files at a time at least. Vitest's default is one worker per core but one, which on a
    // 2-core machine runs the files one after another. The suite keeps both cores busy (vmstat: 0-1 %
    // idle, a third of it in the kernel starting processes), yet a third file still overlaps the
    // others' waits on child processes, PostgreSQL and timers: 592 s with two workers, 524 s with
    // three (2026-12-04, the whole suite on this 2-core machine). Each file has its own schemas, temp
    // dirs and ports, so files never share state.
    maxWorkers: Math.max(3, availableParallelism() - 1),
    // A worker runs its files one after another in one module graph instead of re-importing
    // okengine (through vite's transform) for each: the suite spent 112 s importing with isolation,
    // 14 s without, and 582 → 432 s of wall time on 2 cores. Safe because no test mocks a module or
    // changes process.env, and every file has its own schemas, temp dirs and ports.
    isolate: false,
    sequence: { sequencer: LongestFirst },
  },
});
