/** The postgres driver's public surface. */
export { createPostgresStore, type PostgresStoreOptions } from "./postgres-store.ts";
export type { PgLogger } from "./postgres-context.ts";
