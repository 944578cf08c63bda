// The three drivers as app-level test targets, each on its own schema or directory.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { dropSchema, emptySchema } from "../../src/store/postgres/test-support.ts";
import type { Store } from "../../src/store/types.ts";

export const TEST_DATABASE_URL = process.env.DATABASE_URL_TEST ?? "postgres://postgres@127.0.0.1:5432/test";

export interface DriverFixture {
  name: "memory" | "file" | "postgres";
  /** A fresh, empty store; `cleanup` removes what it left behind. */
  make(): Promise<{ store: Store; cleanup: () => Promise<void> }>;
}

let schemaSeq = 0;

// A schema a cleaned-up store leaves is emptied (emptySchema: no rows, sequences restarted; a few
// ms) and handed to the next make(), whose store finds every migration applied: migrating a new
// schema per case cost ~0.45 s of server DDL each. Dropped once this test file is done.
const spareSchemas: string[] = [];
afterAll(async () => {
  for (const schema of spareSchemas.splice(0)) await dropSchema(schema, TEST_DATABASE_URL);
});

/** Every driver the app-level conformance cases run on. Each make() is isolated: own dir / own schema (new, or emptied). */
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
      const schema = spareSchemas.pop() ?? `oke_app_${process.pid}_${Date.now().toString(36)}_${schemaSeq++}`;
      const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
      let cleaned = false;
      return {
        store,
        cleanup: async () => {
          // Twice on the spare list would hand one schema to two stores.
          if (cleaned) return;
          cleaned = true;
          await store.close();
          await emptySchema(schema, TEST_DATABASE_URL);
          spareSchemas.push(schema);
        },
      };
    },
  },
];
