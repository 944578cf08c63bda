import { defineConfig } from "vitest/config";

import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";

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
    // Two files at a time at least. Vitest's default is one worker per core but one, which on a
    // 2-core machine runs the files one after another; most of this suite's time is spent waiting on
    // child processes, PostgreSQL and timers rather than on a core. Each file has its own schemas,
    // temp dirs and ports, so files never share state.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // A worker runs its files one after another in one module graph instead of re-importing
    // okengine (through vite's transform) for each: the suite spent 112 s importing with isolation,
    // 14 s without, and 582 → 432 s of wall time on 2 cores. Safe because no test mocks a module or
    // changes process.env, and every file has its own schemas, temp dirs and ports.
    isolate: false,
  },
});
