// What the process tests' child programs share: the JSON-lines report, the store from the env, a boot that says "ready" and stops on SIGTERM.
import { destination, pino } from "pino";
import { createApp, type App, type CreateAppOptions } from "../../src/index.ts";
import { createFileStore } from "../../src/store/file/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { Store } from "../../src/store/types.ts";

/** One event as a JSON line on stdout, with this process's pid (what spawn.ts's Child reads). */
export const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

/** DATABASE_URL, as the child got it. */
export const databaseUrl = process.env.DATABASE_URL ?? "";

/** The file driver in OKE_FILE_DIR when set, else PostgreSQL on DATABASE_URL and OKE_SCHEMA (default "okengine"). */
export function envStore(): Store {
  const dir = process.env.OKE_FILE_DIR;
  if (dir !== undefined) return createFileStore({ dir });
  return createPostgresStore({ connectionString: databaseUrl, schema: process.env.OKE_SCHEMA ?? "okengine" });
}

/** OKE_LEASE_MS, else 30 s: the tests shorten leases so a SIGKILLed holder's lapse comes soon. */
export const leaseMs = Number(process.env.OKE_LEASE_MS ?? 30_000);

/**
 * Boots `app`, prints {"event":"ready"}, and on SIGTERM stops it (2 s), closes `store` and exits 0.
 */
export async function bootUntilSigterm(app: App, store: Store): Promise<void> {
  await app.boot();
  // Before "ready": a parent that signals on "ready" must find the handler (child-app.ts says why).
  process.on("SIGTERM", () => {
    void app.stop({ timeoutMs: 2_000 }).then(async () => {
      await store.close();
      process.exit(0);
    });
  });
  say({ event: "ready" });
}

/**
 * Starts `modules` as an app in env test on a free port of 127.0.0.1 and prints
 * {"event":"listening","port"}. Its log goes to stderr at OKE_LOG_LEVEL (silent by default), for a
 * test that reports it when it fails.
 */
export async function listenOnFreePort(modules: CreateAppOptions["modules"], store: Store): Promise<App> {
  const logger = pino({ level: process.env.OKE_LOG_LEVEL ?? "silent" }, destination(2));
  const app = createApp({ env: "test", modules, store, logger });
  const { port } = await app.start({ port: 0, host: "127.0.0.1" });
  say({ event: "listening", port });
  return app;
}
