import { defineConfig } from "okengine";

// Defaults: dev keeps queues and durable runs in .oke/ (the file driver), tests in memory, and prod
// on PostgreSQL (DATABASE_URL). Every setting is listed in okengine's docs/drivers.md.
export default defineConfig({
  env: {
    dev: { drivers: { journal: "file" } },
  },
});
