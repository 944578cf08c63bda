import { defineConfig } from "okengine";

// The defaults need no setting: `npm run dev` keeps queues and durable runs in .oke/ (the file
// driver), or in PostgreSQL when DATABASE_URL is set; tests run in memory; `npm start` (prod) needs
// DATABASE_URL. Every setting is listed in okengine's docs/drivers.md.
export default defineConfig({});
