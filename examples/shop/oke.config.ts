import { defineConfig } from "okengine";

// Without DATABASE_URL, `oke dev` keeps queues and journals in .oke/ (file driver).
export default defineConfig({
  signals: { concurrency: 8 },
  env: {
    test: { drivers: { journal: "memory", send: "memory" } },
  },
});
