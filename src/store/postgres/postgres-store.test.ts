// The Store contract on postgres, every case on an empty, migrated schema of its own variant.
import { afterAll } from "vitest";
import { describeStoreConformance } from "../conformance/suite.ts";
import type { PostgresStoreOptions } from "./postgres-store.ts";
import { dropSchema, emptySchema, freshSchema, openStore } from "./test-support.ts";

// The whole contract. Each variant migrates one schema (its first case's open()) and every later
// case gets it emptied (emptySchema: no rows, sequences restarted) and opens its own store on it,
// whose open() finds every migration applied, as on every boot after an app's first. A new schema
// per case cost ~0.45 s of DDL each, 274 times: about 80% of this file. postgres-migrate.test.ts
// tests migrating itself.
const factory = (tag: string, options: Partial<PostgresStoreOptions>) => {
  const schema = freshSchema(tag);
  let migrated = false;
  afterAll(() => dropSchema(schema));
  return async () => {
    if (migrated) await emptySchema(schema);
    migrated = true;
    const store = await openStore(schema, { poolSize: 2, ...options });
    return { store, cleanup: () => store.close() };
  };
};

describeStoreConformance("postgres", factory("conf", {}), {
  supportsTx: true,
  claimAtEmit: true,
  leaveToLease: true,
  leaveClaimsToLease: true,
  resettleDelivered: true,
  releaseHold: true,
});

// Poll-only mode (PgBouncer): no NOTIFY, no LISTEN connection. The
// poll period is far away so no synthetic wake lands inside a case.
describeStoreConformance(
  "postgres (poll-only)",
  factory("confpoll", { notify: false, pollIntervalMs: 3_600_000 }),
  {
    supportsTx: true,
    claimAtEmit: true,
    leaveToLease: true,
    leaveClaimsToLease: true,
    resettleDelivered: true,
    releaseHold: true,
  },
);
