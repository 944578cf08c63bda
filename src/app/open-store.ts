/** Opens the journal driver the config names (memory, file or postgres). */
import { resolve } from "node:path";
import type { Logger } from "../log/logger.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { createPostgresStore } from "../store/postgres/postgres-store.ts";
import type { Store } from "../store/types.ts";
import type { ResolvedConfig } from "./config.ts";

/** The journal driver the config names: memory · file · postgres. */
export function openStore(config: ResolvedConfig, root: string, logger: Logger): Store {
  switch (config.journal) {
    case "memory":
      return createMemoryStore(undefined, { logger });
    case "file":
      return createFileStore({ dir: resolve(root, config.fileDir), logger });
    case "postgres":
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
