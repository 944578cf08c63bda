// The Store contract on postgres, every case on a fresh schema.
import { describeStoreConformance } from "../conformance/suite.ts";
import type { PostgresStoreOptions } from "./postgres-store.ts";
import { dropSchema, freshSchema, openStore } from "./test-support.ts";

// The whole contract, every case on a fresh schema (migrated by open()).
const factory = (options: Partial<PostgresStoreOptions>) => async () => {
  const schema = freshSchema("conf");
  const store = await openStore(schema, { poolSize: 2, ...options });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await dropSchema(schema);
    },
  };
};

describeStoreConformance("postgres", factory({}), { supportsTx: true, claimAtEmit: true });

// Poll-only mode (PgBouncer): no NOTIFY, no LISTEN connection. The
// poll period is far away so no synthetic wake lands inside a case.
describeStoreConformance("postgres (poll-only)", factory({ notify: false, pollIntervalMs: 3_600_000 }), {
  supportsTx: true,
  claimAtEmit: true,
});
