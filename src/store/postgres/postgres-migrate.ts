/** Applies pending postgres migrations in one transaction under an advisory lock. */
import type pg from "pg";
import { migrations as allMigrations, type Migration } from "./migrations/index.ts";
import { postgresStoreErrors } from "./postgres-errors.ts";

/**
 * Applies pending migrations in ONE transaction under a transaction-scoped
 * advisory lock keyed by the schema name. Concurrent opens (many processes
 * booting at once) queue on the lock; the later ones find every migration
 * recorded and apply nothing. CREATE SCHEMA runs under the lock too, since
 * concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide.
 * Returns the ids applied by this call.
 */
export async function migrate(
  pool: pg.Pool,
  schemaName: string,
  s: string,
  migrations: readonly Migration[] = allMigrations,
): Promise<number[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client has no pool listener: without this, a connection
  // dropped between two statements would be an unhandled 'error' (a crash).
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on("error", onError);
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `okengine:migrate:${schemaName}`,
    ]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`,
    );
    const { rows } = await client.query<{ id: number }>(`SELECT id FROM ${s}.migrations ORDER BY id`);
    const done = new Set(rows.map((r) => r.id));
    const latestKnown = migrations.at(-1)?.id ?? 0;
    const latestDb = rows.at(-1)?.id ?? 0;
    if (latestDb > latestKnown) throw postgresStoreErrors.newerSchema(schemaName, latestDb, latestKnown);
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      await client.query(m.sql(s));
      // applied_at is bookkeeping for operators, not semantics: the wall clock is fine here.
      await client.query(`INSERT INTO ${s}.migrations (id, name, applied_at) VALUES ($1, $2, $3)`, [
        m.id,
        m.name,
        Date.now(),
      ]);
      applied.push(m.id);
    }
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
