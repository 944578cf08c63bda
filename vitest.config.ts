import { defineConfig } from "vitest/config";

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
  },
});
