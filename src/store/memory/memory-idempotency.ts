/** The idempotency half of the memory engine: one record per key, synchronous and replayable. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../idempotency-types.ts";
import { decideClaim, decideComplete, runningFor } from "../idempotency-rules.ts";

const clone = (r: IdempotencyRecord): IdempotencyRecord => ({
  ...r,
  response: r.response === null ? null : { ...r.response },
});

export class MemoryIdempotency {
  private readonly records = new Map<string, IdempotencyRecord>();

  load(records: readonly IdempotencyRecord[] | undefined): void {
    for (const r of records ?? []) this.records.set(r.key, clone(r));
  }

  snapshot(): IdempotencyRecord[] {
    return [...this.records.values()].map(clone);
  }

  /** Returns the claim (idempotency-rules decideClaim) and whether state changed (only then is the op logged). */
  claim(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    const { claim, write } = decideClaim(this.records.get(req.key), req);
    if (write !== null) this.records.set(req.key, write);
    // The claim's record is the stored one: the caller gets a copy.
    const out: IdempotencyClaim =
      claim.kind === "claimed" ? claim : { kind: claim.kind, record: clone(claim.record) };
    return { claim: out, changed: write !== null };
  }

  private running(key: string, fingerprint: string): IdempotencyRecord | undefined {
    const r = this.records.get(key);
    return runningFor(r, fingerprint) ? r : undefined;
  }

  renew(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    const r = this.running(req.key, req.fingerprint);
    if (r === undefined) return false;
    r.lockedUntil = req.now + req.lockMs;
    return true;
  }

  complete(req: CompleteIdempotencyRequest): CompleteOutcome {
    const { outcome, write } = decideComplete(this.records.get(req.key), req);
    if (write !== null) this.records.set(req.key, write);
    return outcome;
  }

  release(req: { key: string; fingerprint: string }): boolean {
    if (this.running(req.key, req.fingerprint) === undefined) return false;
    this.records.delete(req.key);
    return true;
  }

  get(key: string): IdempotencyRecord | undefined {
    const r = this.records.get(key);
    return r === undefined ? undefined : clone(r);
  }

  /** A scan: it runs once per window fraction (hourly at most), not per request. */
  prune(before: number): number {
    let n = 0;
    for (const [key, r] of this.records) {
      if (r.expiresAt <= before) {
        this.records.delete(key);
        n++;
      }
    }
    return n;
  }
}
