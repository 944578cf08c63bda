/** The file engine's Idempotency-Key records over the idempotency_keys table. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../../idempotency-types.ts";
import { decideClaim, decideComplete, runningFor } from "../../idempotency-rules.ts";
import { toIdem, type IdemRow } from "./sqlite-rows.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";

export class SqliteIdempotency {
  constructor(private readonly b: SqliteBatch) {}

  private idem(key: string): IdempotencyRecord | undefined {
    const r = this.b.get<IdemRow>("SELECT * FROM idempotency_keys WHERE key = ?", key);
    return r === undefined ? undefined : toIdem(r);
  }

  private putIdem(r: IdempotencyRecord): void {
    this.b.run(
      `INSERT INTO idempotency_keys (key, fingerprint, status, response, run_id, locked_until, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
         response = excluded.response, run_id = excluded.run_id, locked_until = excluded.locked_until,
         created_at = excluded.created_at, expires_at = excluded.expires_at`,
      r.key,
      r.fingerprint,
      r.status,
      r.response === null ? null : JSON.stringify(r.response),
      r.runId,
      r.lockedUntil,
      r.createdAt,
      r.expiresAt,
    );
  }

  /** idempotency-rules decideClaim over the key's row. */
  claimIdempotency(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    this.b.check();
    const { claim, write } = decideClaim(this.idem(req.key), req);
    if (write !== null) this.b.write(() => this.putIdem(write));
    return { claim, changed: write !== null };
  }

  private runningIdem(key: string, fingerprint: string): IdempotencyRecord | undefined {
    const r = this.idem(key);
    return runningFor(r, fingerprint) ? r : undefined;
  }

  renewIdempotency(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    this.b.check();
    const r = this.runningIdem(req.key, req.fingerprint);
    if (r === undefined) return false;
    r.lockedUntil = req.now + req.lockMs;
    this.b.write(() => this.putIdem(r));
    return true;
  }

  completeIdempotency(req: CompleteIdempotencyRequest): CompleteOutcome {
    this.b.check();
    const { outcome, write } = decideComplete(this.idem(req.key), req);
    if (write !== null) this.b.write(() => this.putIdem(write));
    return outcome;
  }

  releaseIdempotency(req: { key: string; fingerprint: string }): boolean {
    this.b.check();
    if (this.runningIdem(req.key, req.fingerprint) === undefined) return false;
    this.b.write(() => this.b.run("DELETE FROM idempotency_keys WHERE key = ?", req.key));
    return true;
  }

  getIdempotency(key: string): IdempotencyRecord | undefined {
    this.b.check();
    return this.idem(key);
  }

  pruneIdempotency(before: number): number {
    this.b.check();
    if (this.b.get("SELECT 1 FROM idempotency_keys WHERE expires_at <= ? LIMIT 1", before) === undefined)
      return 0;
    return this.b.write(() => this.b.run("DELETE FROM idempotency_keys WHERE expires_at <= ?", before));
  }
}
