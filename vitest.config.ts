import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    // Real PostgreSQL and real child processes: give them room, but never sleep in tests.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
