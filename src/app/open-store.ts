/** Opens the journal driver the config names (memory, file or postgres). */
import { resolve } from "node:path";
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { checkConnectionString } from "../store/postgres/postgres-connection-string.ts";
import { createPostgresStore } from "../store/postgres/postgres-store.ts";
import type { Store } from "../store/types.ts";
import type { ResolvedConfig } from "./config.ts";

/**
 * The journal driver the config names: memory · file · postgres. A PostgreSQL URL that cannot be
 * used fails here, before boot's connect wait, naming the setting it came from (OKE1098); a server
 * that refuses it (no such database OKE1337, login refused OKE1338) fails the open with a code and a fix.
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
      const store = createPostgresStore({
        connectionString: config.databaseUrl!,
        schema: config.databaseSchema,
        poolSize: config.poolSize,
        notify: config.notify,
        pollIntervalMs: config.pollIntervalMs,
        connectAttemptTimeoutMs: config.connectAttemptTimeoutMs,
        stallWarnMs: config.stallWarnMs,
        logger,
      });
      const url = config.databaseUrl!;
      return {
        ...store,
        open: (options) =>
          store.open(options).catch((e: unknown) => {
            throw postgresRefusal(e, url, from) ?? e;
          }),
      };
    }
  }
}

/** The parts of a connection string a fix names (`createdb -h … -p … -U …`); undefined where it has none. */
function urlParts(url: string): { host?: string; port?: string; user?: string; database?: string } {
  try {
    const u = new URL(url);
    const param = new URLSearchParams(u.search);
    return {
      host: u.hostname || param.get("host") || undefined,
      port: u.port || undefined,
      user: u.username === "" ? undefined : decodeURIComponent(u.username),
      database: u.pathname.length > 1 ? decodeURIComponent(u.pathname.slice(1)) : undefined,
    };
  } catch {
    return {};
  }
}

/**
 * PostgreSQL's refusal of the connection itself, as an OkeError with a fix: its own text
 * (`database "x" does not exist`) names neither the setting nor what to do. These are not
 * outages (boot does not wait them out): the URL, or the server's roles, must change.
 * Undefined for any other error. Never shows the password.
 */
export function postgresRefusal(e: unknown, url: string | undefined, from: string): OkeError | undefined {
  if (!(e instanceof Error)) return undefined;
  const code = (e as { code?: unknown }).code;
  const { host, port, user, database } = url === undefined ? {} : urlParts(url);
  const address = `${host ?? "localhost"}:${port ?? "5432"}`;
  // Without the URL (a store the app was handed, refused at open) the address is not known.
  const server = url === undefined ? "the PostgreSQL server" : `the PostgreSQL server at ${address}`;
  const where = url === undefined ? {} : { address };
  // pg's own error (no SQLSTATE: the server answered the SSL request with "N").
  if (code === undefined && e.message === "The server does not support SSL connections")
    return new OkeError({
      code: "OKE1336",
      message: `oke boot: ${server} does not support SSL connections, but ${from} asks for SSL`,
      fix: `Enable SSL on the server (ssl = on), or drop sslmode=require / ssl=true from ${from} for a server reached over a trusted network only.`,
      details: { ...where },
      cause: e,
    });
  if (typeof code !== "string") return undefined;
  const flags = `${host === undefined ? "" : ` -h ${host}`}${port === undefined ? "" : ` -p ${port}`}`;
  // 3D000 invalid_catalog_name: the database named at the end of the URL is not on that server.
  if (code === "3D000") {
    const name = /database "(.*)" does not exist/.exec(e.message)?.[1] ?? database ?? "?";
    return new OkeError({
      code: "OKE1337",
      message: `oke boot: database "${name}" does not exist on ${server} (${from})`,
      fix:
        `Create it (\`createdb${flags}${user === undefined ? "" : ` -U ${user}`} ${name}\`, or CREATE DATABASE ${JSON.stringify(name)}), ` +
        `or correct the database name at the end of ${from} (postgres://user:password@host:5432/<database>).`,
      details: { database: name, ...where, pgCode: code },
      cause: e,
    });
  }
  // Class 28, invalid authorization: no such role, a wrong password, no pg_hba.conf line for this client.
  if (code.startsWith("28")) {
    const role = /role "(.*)" does not exist/.exec(e.message)?.[1];
    const fix =
      role !== undefined
        ? `Correct the user in ${from}, or create the role: \`createuser${flags} --login --pwprompt ${role}\` (or CREATE ROLE ${JSON.stringify(role)} LOGIN PASSWORD '…').`
        : code === "28P01"
          ? `Check the user and password in ${from} (a password with @ : / ? # must be percent-encoded, @ as %40).`
          : `Check the user in ${from}, and that the server's pg_hba.conf lets it connect from this host.`;
    return new OkeError({
      code: "OKE1338",
      message: `oke boot: ${server} refused the login: ${e.message} (${from})`,
      fix,
      details: { ...where, pgCode: code, ...(role === undefined ? {} : { role }) },
      cause: e,
    });
  }
  return undefined;
}
