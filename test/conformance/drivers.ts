// The three drivers as app-level test targets, each on its own schema or directory.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { Store } from "../../src/store/types.ts";

export const TEST_DATABASE_URL = process.env.DATABASE_URL_TEST ?? "postgres://postgres@127.0.0.1:5432/test";

export interface DriverFixture {
  name: "memory" | "file" | "postgres";
  /** A fresh, empty store; `cleanup` removes what it left behind. */
  make(): Promise<{ store: Store; cleanup: () => Promise<void> }>;
}

let schemaSeq = 0;

/** Every driver the app-level conformance cases run on. Each make() is isolated: own dir / own schema. */
export const drivers: DriverFixture[] = [
  {
    name: "memory",
    make: async () => {
      const store = createMemoryStore();
      return { store, cleanup: () => store.close() };
    },
  },
  {
    name: "file",
    make: async () => {
      const dir = mkdtempSync(join(tmpdir(), "oke-conf-"));
      const store = createFileStore({ dir });
      return {
        store,
        cleanup: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: "postgres",
    make: async () => {
      const schema = `oke_app_${process.pid}_${Date.now().toString(36)}_${schemaSeq++}`;
      const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
      return {
        store,
        cleanup: async () => {
          await store.close();
          const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
          await c.connect();
          try {
            await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await c.end();
          }
        },
      };
    },
  },
];
