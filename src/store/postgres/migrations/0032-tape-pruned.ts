/** Migration 0032: per live signal, the highest tape position retention pruned, so a resume past it is told of the gap. */
import type { Migration } from "./migration.ts";

/**
 * A reader resuming after position p gets nothing that retention pruned after p, and without a
 * record of the prune it cannot be told (positions come from one sequence for every tape, so a
 * jump proves nothing). One row per signal ever pruned, raised by each prune (postgres-fanout.ts
 * pruneTape), read by tapeGap: a keyed signal's prune names no key, so a gap is never missed and
 * may be reported to a key that had none.
 */
export const m0032: Migration = {
  id: 32,
  name: "tape-pruned",
  // A table no statement of older code names: code at 28 or later runs on it as before (its
  // prunes just leave the row behind, so a gap they made is not reported).
  runsWith: 28,
  sql: (s) => `
CREATE TABLE IF NOT EXISTS ${s}.tape_pruned (
  signal text PRIMARY KEY,
  through bigint NOT NULL
);
`,
};
