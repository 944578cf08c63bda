/** Migration 0002: the per-key guard for a whole batch of keyed heads in one call. */
import { lit } from "./0001-initial.ts";
import type { Migration } from "./index.ts";

/**
 * The per-key guard of 0001 (claim_key_free), for a whole batch of keyed heads
 * in one call: try the advisory lock of each key, then ONE query in a fresh
 * snapshot for the keys that hold a live lease. The claim calls it once per
 * statement instead of once per head.
 *
 * Why: claim_key_free's probe ("another message of this key holds a live
 * lease?") is planned once and cached, and with statistics taken before the
 * queue filled (no inflight rows) that plan walks every live lease of the
 * signal through messages_inflight instead of probing messages_key_inflight.
 * With ~500 keys held (a deep prefetch over 1 000 keys) it cost ~95 µs per
 * claimed keyed message — most of a keyed claim. Here the live leases are read
 * once per claim, whatever the plan: O(leases + heads), not O(leases × heads).
 *
 * Only for pending heads: the candidate rows themselves cannot hold a lease
 * (they were locked as pending), so no row needs excluding.
 */
export const m0002: Migration = {
  id: 2,
  name: "key-guard-batch",
  sql: (s) => `
CREATE FUNCTION ${s}.claim_keys_free(p_signal text, p_keys text[], p_now bigint)
RETURNS text[] LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  k text;
  locked text[] := '{}';
BEGIN
  FOREACH k IN ARRAY p_keys LOOP
    IF pg_try_advisory_xact_lock(hashtext(${lit(s)} || p_signal), hashtext(k)) THEN
      locked := locked || k;
    END IF;
  END LOOP;
  IF cardinality(locked) = 0 THEN
    RETURN locked;
  END IF;
  RETURN ARRAY(
    SELECT unnest(locked)
    EXCEPT
    SELECT o.key FROM ${s}.messages o
    WHERE o.signal = p_signal AND o.status = 'inflight' AND o.key IS NOT NULL AND o.lease_expires_at > p_now);
END
$fn$;
`,
};
