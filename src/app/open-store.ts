/** Opens the journal driver the config names (memory, file or postgres). */
import { resolve } from "node:path";
import type { Logger } from "../log/logger.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { checkConnectionString } from "../store/postgres/postgres-connection-string.ts";
import { createPostgresStore } from "../store/postgres/postgres-store.ts";
import type { Store } from "../store/types.ts";
import type { ResolvedConfig } from "./config.ts";

/**
 * The journal driver the config names: memory · file · postgres. A PostgreSQL URL that cannot be
 * used fails here, before boot's connect wait, naming the setting it came from (OKE1098).
 */
export function openStore(
  config: ResolvedConfig,
  root: string,
  logger: Logger,
  vars: NodeJS.ProcessEnv = process.env,
): Store {
  switch (config.journal) {
    case "memory":
      return createMemoryStore(undefined, { logger });
    case "file":
      return createFileStore({ dir: resolve(root, config.fileDir), logger });
    case "postgres": {
      // database.url wins over DATABASE_URL (config.ts); the same text means it came from the variable.
      const from = vars.DATABASE_URL === config.databaseUrl ? "DATABASE_URL" : "database.url";
      checkConnectionString(config.databaseUrl!, `oke boot: ${from}`);
      return createPostgresStore({
        connectionString: config.databaseUrl!,
        schema: config.databaseSchema,
        poolSize: config.poolSize,
        notify: config.notify,
        pollIntervalMs: config.pollIntervalMs,
        connectAttemptTimeoutMs: config.connectAttemptTimeoutMs,
        logger,
      });
    }
  }
}
