/** The Idempotency-Key rules the memory and file drivers apply the same way: claim, complete, and which record is a request's own. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "./idempotency-types.ts";

/**
 * A claim of `req.key` whose live record (if any) is `r`, and the record the
 * driver must store for it (null: nothing changes). A missing or expired
 * record becomes a new running one (claimed); a running record with the same
 * fingerprint whose lock lapsed is locked again (takenOver, same runId); any
 * other is answered from (existing: done → replay, running → busy, other
 * fingerprint → mismatch). The claim's record is `write` itself, or `r`: a
 * driver that keeps `r` must not hand it out uncopied.
 */
export function decideClaim(
  r: IdempotencyRecord | undefined,
  req: ClaimIdempotencyRequest,
): { claim: IdempotencyClaim; write: IdempotencyRecord | null } {
  if (r === undefined || r.expiresAt <= req.now)
    return {
      claim: { kind: "claimed" },
      write: {
        key: req.key,
        fingerprint: req.fingerprint,
        status: "running",
        response: null,
        runId: req.runId,
        lockedUntil: req.now + req.lockMs,
        createdAt: req.now,
        expiresAt: req.now + req.windowMs,
      },
    };
  if (r.status === "running" && r.fingerprint === req.fingerprint && r.lockedUntil <= req.now) {
    const write = { ...r, lockedUntil: req.now + req.lockMs };
    return { claim: { kind: "takenOver", record: write }, write };
  }
  return { claim: { kind: "existing", record: r }, write: null };
}

/** Whether `r` is the running record of the request with `fingerprint` (renew and release touch only it). */
export const runningFor = (r: IdempotencyRecord | undefined, fingerprint: string): r is IdempotencyRecord =>
  r !== undefined && r.status === "running" && r.fingerprint === fingerprint;

/**
 * A completion of `req.key` whose record (if any) is `r`, and the record to
 * store (null: nothing changes). See CompleteOutcome.
 */
export function decideComplete(
  r: IdempotencyRecord | undefined,
  req: CompleteIdempotencyRequest,
): { outcome: CompleteOutcome; write: IdempotencyRecord | null } {
  if (r === undefined || r.expiresAt <= req.now) return { outcome: "restored", write: restoredRecord(req) };
  if (!runningFor(r, req.fingerprint)) return { outcome: "superseded", write: null };
  return { outcome: "completed", write: { ...r, status: "done", response: { ...req.response } } };
}

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
