/** Applies pending postgres migrations in one transaction under an advisory lock, with no DDL when none is pending. */
import type pg from "pg";
import { OkeError } from "../../errors.ts";
import { migrations as allMigrations, type Migration } from "./migrations/index.ts";
import { okengineVersion } from "../../okengine-version.ts";
import { DB_NOW_MS } from "./postgres-context.ts";
import { postgresStoreErrors } from "./postgres-errors.ts";

/**
 * OKE1334: a migration step the database role may not run. `privilege` says what the role lacks;
 * no `cause`, on purpose: a cause would make the store call this an outage (retried for
 * `database.connectTimeoutMs`), and a missing privilege never comes back by waiting.
 */
export function migrationPermissionError(
  schema: string,
  role: string,
  step: string,
  privilege: string,
  error: string,
): OkeError {
  return new OkeError({
    code: "OKE1334",
    message: `Postgres role "${role}" may not ${step} (schema ${schema}): ${error}.`,
    fix:
      `Grant ${privilege} to "${role}", or boot once with a DATABASE_URL of a role that has it (the ` +
      "schema's owner) to apply the migrations: a role that only runs the app needs no DDL right " +
      "once no migration is pending (docs/drivers.md#privileges).",
    details: { schema, role, step, privilege, sqlstate: "42501" },
  });
}

/** An instance counts as live this long after its last heartbeat (the Console's ALIVE_MS). */
export const LIVE_INSTANCE_MS = 30_000;

/** Who opens the store (Store.open's `instance`), recorded by migrate() as a live instance. */
export interface Opener {
  id: string;
  host: string;
  pid: number;
}

/**
 * A migration whose `runsWith` is above what a live instance's code knows would change the schema
 * under that instance: its statements could fail, or do the wrong thing, mid-flight. Such a migration
 * is not applied while one is live (OKE1335): the older instances keep running as they were, and the
 * new code boots once they have stopped. Each heartbeat records the last migration its code knows
 * (`storeMigration`); an instance from before that field is taken to know the schema's latest
 * migration (a fleet all on one version, the usual case). An instance opening the store is recorded
 * the same way by its open's migrate() (recordOpener), under the lock this check runs under: it is
 * counted from then on, not from its first heartbeat at the end of its boot. Live: a heartbeat (or an
 * open) within 30 s, on the database's clock.
 */
async function refuseWhileOlderCodeRuns(
  client: pg.PoolClient,
  schemaName: string,
  s: string,
  pending: readonly Migration[],
  latestDb: number,
): Promise<void> {
  const needs = Math.max(...pending.map((m) => m.runsWith ?? m.id));
  const { rows } = await client.query<{ info: Record<string, unknown> }>(
    `SELECT info FROM ${s}.instances WHERE seen_at >= ${DB_NOW_MS} - $1 ORDER BY started_at, id COLLATE "C"`,
    [LIVE_INSTANCE_MS],
  );
  const text = (v: unknown): string => (typeof v === "string" ? v : "?");
  const older = rows
    .map(({ info }) => ({
      id: text(info.id),
      host: text(info.host),
      pid: typeof info.pid === "number" ? info.pid : 0,
      okengine: text(info.okengineVersion),
      knows: typeof info.storeMigration === "number" ? info.storeMigration : latestDb,
    }))
    .filter((i) => i.knows < needs);
  if (older.length === 0) return;
  const breaking = pending.find((m) => (m.runsWith ?? m.id) === needs)!;
  throw postgresStoreErrors.olderCodeLive(schemaName, breaking.id, breaking.name, needs, older);
}

/**
 * Records the opener as a live instance, in migrate()'s transaction: a newer version's migrate()
 * queued on the lock then sees it (OKE1335), and one that committed first made this open refuse the
 * newer schema (OKE1332) before it got here. `booting` keeps the row out of listInstances (the
 * Console, the fleet's environment check: they count an instance from its first heartbeat, which
 * overwrites this row with the full info). Booting rows that never got a heartbeat (a failed boot) and
 * went stale are deleted here, so a crash-looping boot does not pile rows up.
 */
async function recordOpener(client: pg.PoolClient, s: string, opener: Opener, knows: number): Promise<void> {
  await client.query(`DELETE FROM ${s}.instances WHERE info ? 'booting' AND seen_at < ${DB_NOW_MS} - $1`, [
    LIVE_INSTANCE_MS,
  ]);
  const info = {
    id: opener.id,
    host: opener.host,
    pid: opener.pid,
    okengineVersion: okengineVersion(),
    storeMigration: knows,
    booting: true,
  };
  await client.query(
    `INSERT INTO ${s}.instances (id, info, started_at, seen_at) VALUES ($1, $2, ${DB_NOW_MS}, ${DB_NOW_MS})
     ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at
       WHERE ${s}.instances.info ? 'booting'`,
    [opener.id, JSON.stringify(info)],
  );
}

const isPermissionDenied = (e: unknown): e is Error =>
  e instanceof Error && (e as { code?: unknown }).code === "42501";

/**
 * Applies pending migrations in ONE transaction under a transaction-scoped
 * advisory lock keyed by the schema name. Concurrent opens (many processes
 * booting at once) queue on the lock; the later ones find every migration
 * recorded and apply nothing. The schema and the migrations table are looked
 * up in the catalogs first and created only when missing (under the lock, since
 * concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide): PostgreSQL checks
 * the CREATE privilege before `IF NOT EXISTS`, so a role that only runs the app
 * (no DDL right) boots on a schema already migrated. With `opener`, that instance is recorded in
 * `instances` before the commit (recordOpener). Returns the ids applied by this call.
 */
export async function migrate(
  pool: pg.Pool,
  schemaName: string,
  s: string,
  migrations: readonly Migration[] = allMigrations,
  opener?: Opener,
): Promise<number[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client has no pool listener: without this, a connection
  // dropped between two statements would be an unhandled 'error' (a crash).
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on("error", onError);
  let role = "?";
  /** `run`, with a permission error turned into OKE1334 naming `step` and `privilege`. */
  const step = async <T>(what: string, privilege: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (e) {
      throw isPermissionDenied(e)
        ? migrationPermissionError(schemaName, role, what, privilege, e.message)
        : e;
    }
  };
  /** The opener recorded (if any), by the role that reads and writes `instances` to heartbeat. */
  const record = async (): Promise<void> => {
    if (opener === undefined) return;
    const { rows } = await client.query<{ exists: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relname = 'instances') AS exists`,
      [schemaName],
    );
    // A list of migrations from before the table (tests): no instance to record.
    if (rows[0]?.exists !== true) return;
    await step(
      `record instance ${opener.id} in ${schemaName}.instances`,
      `SELECT, INSERT, UPDATE and DELETE on ${schemaName}.instances (an app's role has them: it heartbeats there)`,
      () => recordOpener(client, s, opener, migrations.at(-1)?.id ?? 0),
    );
  };
  try {
    // READ COMMITTED whatever the role's default: each statement after the lock must see what the
    // migrator before it committed (its migrations, an opener's row); a REPEATABLE READ snapshot
    // would be taken by the lock's statement, before that commit.
    await client.query("BEGIN ISOLATION LEVEL READ COMMITTED");
    // The migrations are okengine's own bounded DDL: a statement_timeout meant for app queries (a role
    // or URL setting) cancelled them (57014), which reads as an outage and was retried until OKE1096.
    // SET LOCAL ends with this transaction; the lock wait below is bounded by the other migrator.
    await client.query("SET LOCAL statement_timeout = 0");
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `okengine:migrate:${schemaName}`,
    ]);
    // Catalog reads need no privilege (to_regclass would need USAGE on the schema).
    const found = await client.query<{
      role: string;
      schema: boolean;
      table: boolean;
      runsWith: boolean;
      okengine: boolean;
      instances: boolean;
    }>(
      `SELECT current_user AS role,
              EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema,
              EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relname = 'migrations') AS table,
              EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relname = 'migrations' AND a.attname = 'runs_with'
                         AND NOT a.attisdropped) AS "runsWith",
              EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relname = 'migrations' AND a.attname = 'okengine'
                         AND NOT a.attisdropped) AS okengine,
              EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relname = 'instances') AS instances`,
      [schemaName],
    );
    const state = found.rows[0]!;
    role = state.role;
    if (!state.schema)
      await step(`create schema ${schemaName}`, "CREATE on the database", () =>
        client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`),
      );
    if (!state.table)
      await step(`create table ${schemaName}.migrations`, `CREATE on schema ${schemaName}`, () =>
        client.query(
          `CREATE TABLE IF NOT EXISTS ${s}.migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL, runs_with integer, okengine text)`,
        ),
      );
    // A table made before runs_with existed (bookkeeping, not a numbered migration: it must be there
    // before any migration is recorded, and older code never reads it). Added once, with the first
    // migration this code applies, which needs the same right.
    else if (!state.runsWith)
      await step(`add runs_with to ${schemaName}.migrations`, `owner of ${schemaName}.migrations`, () =>
        client.query(`ALTER TABLE ${s}.migrations ADD COLUMN IF NOT EXISTS runs_with integer`),
      );
    const { rows } = await step(
      `read ${schemaName}.migrations`,
      `USAGE on schema ${schemaName} and SELECT on ${schemaName}.migrations`,
      () =>
        // SELECT *: okengine (who applied it) is absent from a table made before it.
        client.query<{ id: number; runs_with: number | null; okengine?: string | null }>(
          `SELECT * FROM ${s}.migrations ORDER BY id`,
        ),
    );
    const done = new Set(rows.map((r) => r.id));
    const latestKnown = migrations.at(-1)?.id ?? 0;
    const latestDb = rows.at(-1)?.id ?? 0;
    if (latestDb > latestKnown) {
      // Newer than this code: it may run only if every migration it does not know says code this old
      // still works (Migration.runsWith); nothing is applied then (there is nothing it knows to add).
      const needs = Math.max(...rows.filter((r) => r.id > latestKnown).map((r) => r.runs_with ?? r.id));
      if (needs > latestKnown)
        throw postgresStoreErrors.newerSchema(
          schemaName,
          latestDb,
          latestKnown,
          needs,
          rows.at(-1)?.okengine ?? undefined,
        );
      await record();
      await client.query("COMMIT");
      return [];
    }
    const pending = migrations.filter((m) => !done.has(m.id));
    if (pending.length > 0 && state.instances)
      await step(
        `read ${schemaName}.instances`,
        `SELECT on ${schemaName}.instances (an app's role has it: it heartbeats there)`,
        () => refuseWhileOlderCodeRuns(client, schemaName, s, pending, latestDb),
      );
    const applied: number[] = [];
    // Who applied a migration (bookkeeping like runs_with): added with the first migration this code
    // applies, which needs the same right; a boot with nothing to apply changes nothing.
    if (state.table && !state.okengine && migrations.some((m) => !done.has(m.id)))
      await step(`add okengine to ${schemaName}.migrations`, `owner of ${schemaName}.migrations`, () =>
        client.query(`ALTER TABLE ${s}.migrations ADD COLUMN IF NOT EXISTS okengine text`),
      );
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      await step(
        `apply migration ${m.id} (${m.name})`,
        `owner of schema ${schemaName} and its tables, or CREATE on it`,
        async () => {
          await client.query(m.sql(s));
          // applied_at is bookkeeping for operators, not semantics: the wall clock is fine here.
          await client.query(
            `INSERT INTO ${s}.migrations (id, name, applied_at, runs_with, okengine) VALUES ($1, $2, $3, $4, $5)`,
            [m.id, m.name, Date.now(), m.runsWith ?? m.id, okengineVersion()],
          );
        },
      );
      applied.push(m.id);
    }
    await record();
    await client.query("COMMIT");
    return applied;
  } catch (err) {
    await client.query("ROLLBACK").catch((e: Error) => {
      broken = e;
    });
    throw err;
  } finally {
    client.off("error", onError);
    client.release(broken);
  }
}
