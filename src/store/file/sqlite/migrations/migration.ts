/** The shape of one numbered, frozen migration of the file driver's SQLite schema. */

/** One schema step. Never edit one that shipped: add the next number instead. */
export interface SqliteMigration {
  id: number;
  name: string;
  sql: string;
}
