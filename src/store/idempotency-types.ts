/** IdempotencyStore: the idempotency half of the Store contract (one record per Idempotency-Key). */
/**
 * The idempotency half of the Store contract: one record per Idempotency-Key,
 * so a retried HTTP request is answered from the first one's response instead
 * of running its flow again. The rules (claimIdempotencyKey) are the same on
 * every driver; store/conformance/idempotency-cases.ts holds them to it.
 */

/** The answer stored for a key once its first request finished. */
export interface StoredResponse {
  status: number;
  /** The response body as sent (JSON text), or null for an empty body (204). */
  body: string | null;
}

export interface IdempotencyRecord {
  key: string;
  /** What the first request was (method, URL, body), hashed: a retry must match it. */
  fingerprint: string;
  /** `running`: the first request is executing under `lockedUntil`. `done`: `response` is its answer. */
  status: "running" | "done";
  response: StoredResponse | null;
  /** Run id the first request's flow got; a takeover reuses it, so a durable flow continues the same run. */
  runId: string;
  lockedUntil: number;
  createdAt: number;
  /** End of the window: from then on the key is free again (and pruned). */
  expiresAt: number;
}

export interface ClaimIdempotencyRequest {
  key: string;
  fingerprint: string;
  /** The run id to record if this claim creates the record. */
  runId: string;
  now: number;
  /** How long the running record is locked; renewed while the request runs. */
  lockMs: number;
  /** How long the record lives, from its creation. */
  windowMs: number;
}

/**
 * `claimed`: no live record existed; one is now `running` for the caller.
 * `takenOver`: a `running` record with the same fingerprint whose lock lapsed
 * (its process died) is locked again for the caller, who runs the request
 * again with `record.runId`. `existing`: a live record the caller must answer
 * from (done → its response; running → busy; other fingerprint → mismatch).
 */
export type IdempotencyClaim =
  | { kind: "claimed" }
  | { kind: "takenOver"; record: IdempotencyRecord }
  | { kind: "existing"; record: IdempotencyRecord };

/** A finished request's answer for its key; `runId` and `windowMs` make the record again if it is gone. */
export interface CompleteIdempotencyRequest {
  key: string;
  fingerprint: string;
  response: StoredResponse;
  now: number;
  /** The run id the request ran with (its claim's). */
  runId: string;
  /** The window a record made again lives for, from `now`. */
  windowMs: number;
}

/**
 * How a completion found its key. `completed`: its running record (same
 * fingerprint), now done. `restored`: no live record (pruned, or expired — a
 * request that outran the window): the answer is stored as a new done record
 * for `windowMs`, so a retry still gets it. `superseded`: another request's
 * record (a different fingerprint that claimed the key after it expired, or
 * one that took over and finished first), left as it is.
 */
export type CompleteOutcome = "completed" | "restored" | "superseded";

export interface IdempotencyStore {
  /**
   * One atomic step: a missing key or one whose `expiresAt <= now` becomes a
   * new running record (claimed); a running record with the same fingerprint
   * and `lockedUntil <= now` is re-locked (takenOver); anything else is
   * returned unchanged (existing). Two concurrent claims never both win.
   */
  claimIdempotencyKey(req: ClaimIdempotencyRequest): Promise<IdempotencyClaim>;
  /** Extends the lock of a running record with this fingerprint; false if it is not (any more). */
  renewIdempotencyKey(req: {
    key: string;
    fingerprint: string;
    now: number;
    lockMs: number;
  }): Promise<boolean>;
  /**
   * Running → done with the response, for the record with this fingerprint;
   * a key without a live record gets a done one. See CompleteOutcome.
   */
  completeIdempotencyKey(req: CompleteIdempotencyRequest): Promise<CompleteOutcome>;
  /** Deletes a running record with this fingerprint (its request failed on the server: a retry runs again). */
  releaseIdempotencyKey(req: { key: string; fingerprint: string }): Promise<void>;
  getIdempotencyKey(key: string): Promise<IdempotencyRecord | undefined>;
  /** Deletes records with `expiresAt <= before`. Returns how many. */
  pruneIdempotencyKeys(before: number): Promise<number>;
}
