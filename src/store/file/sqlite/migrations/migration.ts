/** The shape of one numbered, frozen migration of the file driver's SQLite schema. */

/** One schema step. Never edit one that shipped: add the next number instead. */
export interface SqliteMigration {
  id: number;
  name: string;
  sql: string;
  /**
   * The oldest okengine this migration leaves working, as the id of the last migration that code
   * knows (PostgreSQL's Migration.runsWith): recorded with the migration, so code that reads it boots
   * on a store a newer version migrated (a rollback). Default: this migration's own id. Code from
   * before migration 5 reads none and refuses any migration it does not know (OKE1323 there).
   */
  runsWith?: number;
}
