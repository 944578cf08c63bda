/** The file driver's SQLite migrations, in order. Append only. */
import { m0001 } from "./0001-initial.ts";
import type { SqliteMigration } from "./migration.ts";

export type { SqliteMigration } from "./migration.ts";
export const sqliteMigrations: readonly SqliteMigration[] = [m0001];
