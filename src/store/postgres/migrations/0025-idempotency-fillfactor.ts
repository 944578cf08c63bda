/** Migration 0025: idempotency_keys keeps half of each heap page free, so that a completion rewrites its claim's row in place (HOT). */
import type { Migration } from "./migration.ts";

/**
 * A keyed request inserts its row (the claim) and rewrites it once (the completion: status and
 * response). No indexed column changes (key, expires_at), so the rewrite can be HOT, but only if
 * the new version fits on the row's page, and claims filled pages to the brim: 179-210 of ~1 700
 * completions were HOT in bench/http-idempotency.ts at 128 connections; the others put a new heap
 * tuple on another page and an entry in both indexes. The claims of one lane statement land on
 * the same pages and their completions come together in a later statement (one transaction, so
 * none of the dead claim versions can be pruned in between): a page must hold a claim and its done
 * version for every row on it, about 170 + 230 bytes for a UUID key and a short body. At
 * fillfactor 40 every completion was HOT (50: 74%), and page pruning takes the dead claim versions
 * back on a later access. The price is a heap of about 2.5 times its live rows. Applies to pages
 * made from now on; existing pages stay as they are. postgres-idempotency-hot.test.ts.
 */
export const m0025: Migration = {
  id: 25,
  name: "idempotency-fillfactor",
  sql: (s) => `ALTER TABLE ${s}.idempotency_keys SET (fillfactor = 40);`,
};
