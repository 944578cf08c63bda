/** The file driver's SQLite migrations, in order. Append only. */
import { m0001 } from "./0001-initial.ts";
import { m0002 } from "./0002-message-replays.ts";
import { m0003 } from "./0003-run-recoveries.ts";
import { m0004 } from "./0004-run-hold.ts";
import { m0005 } from "./0005-delivered-failed.ts";
import type { SqliteMigration } from "./migration.ts";

export type { SqliteMigration } from "./migration.ts";
export const sqliteMigrations: readonly SqliteMigration[] = [m0001, m0002, m0003, m0004, m0005];
