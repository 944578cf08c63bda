/** Migration 0004: idempotency records. */
import type { Migration } from "./index.ts";

/**
 * Idempotency-Key records (http): one row per key, claimed by one INSERT … ON
 * CONFLICT (a live key is left alone), completed with the response, pruned by
 * `expires_at` (its index serves the prune's range delete).
 */
export const m0004: Migration = {
  id: 4,
  name: "idempotency-keys",
  sql: (s) => `
CREATE TABLE ${s}.idempotency_keys (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'done')),
  response_status integer,
  response_body text,
  run_id text NOT NULL,
  locked_until bigint NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX idempotency_keys_expiry ON ${s}.idempotency_keys (expires_at);
`,
};
