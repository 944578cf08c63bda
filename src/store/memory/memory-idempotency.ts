/** The idempotency half of the memory engine: one record per key, synchronous and replayable. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../idempotency-types.ts";

const clone = (r: IdempotencyRecord): IdempotencyRecord => ({
  ...r,
  response: r.response === null ? null : { ...r.response },
});

/** The done record a completion makes when its key has none live (CompleteOutcome `restored`). */
export const restoredRecord = (req: CompleteIdempotencyRequest): IdempotencyRecord => ({
  key: req.key,
  fingerprint: req.fingerprint,
  status: "done",
  response: { ...req.response },
  runId: req.runId,
  lockedUntil: req.now,
  createdAt: req.now,
  expiresAt: req.now + req.windowMs,
});

export class MemoryIdempotency {
  private readonly records = new Map<string, IdempotencyRecord>();

  load(records: readonly IdempotencyRecord[] | undefined): void {
    for (const r of records ?? []) this.records.set(r.key, clone(r));
  }

  snapshot(): IdempotencyRecord[] {
    return [...this.records.values()].map(clone);
  }

  /** Returns the claim and whether state changed (only then is the op logged). */
  claim(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    const r = this.records.get(req.key);
    if (r === undefined || r.expiresAt <= req.now) {
      this.records.set(req.key, {
        key: req.key,
        fingerprint: req.fingerprint,
        status: "running",
        response: null,
        runId: req.runId,
        lockedUntil: req.now + req.lockMs,
        createdAt: req.now,
        expiresAt: req.now + req.windowMs,
      });
      return { claim: { kind: "claimed" }, changed: true };
    }
    if (r.status === "running" && r.fingerprint === req.fingerprint && r.lockedUntil <= req.now) {
      r.lockedUntil = req.now + req.lockMs;
      return { claim: { kind: "takenOver", record: clone(r) }, changed: true };
    }
    return { claim: { kind: "existing", record: clone(r) }, changed: false };
  }

  private running(key: string, fingerprint: string): IdempotencyRecord | undefined {
    const r = this.records.get(key);
    return r !== undefined && r.status === "running" && r.fingerprint === fingerprint ? r : undefined;
  }

  renew(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    const r = this.running(req.key, req.fingerprint);
    if (r === undefined) return false;
    r.lockedUntil = req.now + req.lockMs;
    return true;
  }

  complete(req: CompleteIdempotencyRequest): CompleteOutcome {
    const r = this.records.get(req.key);
    if (r === undefined || r.expiresAt <= req.now) {
      this.records.set(req.key, restoredRecord(req));
      return "restored";
    }
    if (r.status !== "running" || r.fingerprint !== req.fingerprint) return "superseded";
    r.status = "done";
    r.response = { ...req.response };
    return "completed";
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
