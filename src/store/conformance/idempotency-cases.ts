/** Idempotency keys: claim once, answer retries from the stored response, take over a lapsed lock, expire and prune. */
import { describe, expect, it } from "vitest";
import type { ClaimIdempotencyRequest } from "../idempotency-types.ts";
import { freshStore, T0, type StoreFactory } from "./harness.ts";

const WINDOW = 86_400_000;
const LOCK = 30_000;
const req = (o: Partial<ClaimIdempotencyRequest> = {}): ClaimIdempotencyRequest => ({
  key: "k-1",
  fingerprint: "fp-a",
  runId: "run-1",
  now: T0,
  lockMs: LOCK,
  windowMs: WINDOW,
  ...o,
});

export function idempotencyCases(factory: StoreFactory): void {
  describe("idempotency keys", () => {
    const store = freshStore(factory);

    it("the first claim wins; a retry while it runs sees the running record", async () => {
      expect(await store().claimIdempotencyKey(req())).toEqual({ kind: "claimed" });
      const again = await store().claimIdempotencyKey(req({ runId: "run-2", now: T0 + 5 }));
      expect(again).toEqual({
        kind: "existing",
        record: {
          key: "k-1",
          fingerprint: "fp-a",
          status: "running",
          response: null,
          runId: "run-1",
          lockedUntil: T0 + LOCK,
          createdAt: T0,
          expiresAt: T0 + WINDOW,
        },
      });
    });

    it("concurrent claims of one key: exactly one wins", async () => {
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, i) => store().claimIdempotencyKey(req({ runId: `run-${i}` }))),
      );
      expect(claims.filter((c) => c.kind === "claimed")).toHaveLength(1);
    });

    it("a completed key answers its stored response, and a different fingerprint sees it too", async () => {
      await store().claimIdempotencyKey(req());
      await store().completeIdempotencyKey({
        key: "k-1",
        fingerprint: "fp-a",
        response: { status: 201, body: '{"ok":true,"data":{"id":"é😀"}}' },
        now: T0 + 10,
      });
      const retry = await store().claimIdempotencyKey(req({ now: T0 + 20 }));
      expect(retry.kind).toBe("existing");
      if (retry.kind !== "existing") return;
      expect(retry.record.status).toBe("done");
      expect(retry.record.response).toEqual({ status: 201, body: '{"ok":true,"data":{"id":"é😀"}}' });
      const other = await store().claimIdempotencyKey(req({ fingerprint: "fp-b", now: T0 + 20 }));
      expect(other.kind === "existing" && other.record.fingerprint).toBe("fp-a");
      // An empty body (204) is stored as null.
      await store().claimIdempotencyKey(req({ key: "k-2" }));
      await store().completeIdempotencyKey({
        key: "k-2",
        fingerprint: "fp-a",
        response: { status: 204, body: null },
        now: T0,
      });
      expect((await store().getIdempotencyKey("k-2"))?.response).toEqual({ status: 204, body: null });
    });

    it("completion and release only apply to the running record with the same fingerprint", async () => {
      await store().claimIdempotencyKey(req());
      await store().completeIdempotencyKey({
        key: "k-1",
        fingerprint: "fp-b",
        response: { status: 200, body: "{}" },
        now: T0,
      });
      await store().releaseIdempotencyKey({ key: "k-1", fingerprint: "fp-b" });
      expect((await store().getIdempotencyKey("k-1"))?.status).toBe("running");
      await store().releaseIdempotencyKey({ key: "k-1", fingerprint: "fp-a" });
      expect(await store().getIdempotencyKey("k-1")).toBeUndefined();
      // Released: the next claim runs the request again.
      expect(await store().claimIdempotencyKey(req({ runId: "run-2" }))).toEqual({ kind: "claimed" });
      expect((await store().getIdempotencyKey("k-1"))?.runId).toBe("run-2");
    });

    it("a lapsed lock is taken over by a retry with the same fingerprint, keeping the run id; renew keeps it", async () => {
      await store().claimIdempotencyKey(req());
      expect(
        await store().renewIdempotencyKey({
          key: "k-1",
          fingerprint: "fp-a",
          now: T0 + 20_000,
          lockMs: LOCK,
        }),
      ).toBe(true);
      // Still locked by the renewal.
      expect((await store().claimIdempotencyKey(req({ now: T0 + LOCK + 1 }))).kind).toBe("existing");
      // A different request never takes over.
      expect((await store().claimIdempotencyKey(req({ fingerprint: "fp-b", now: T0 + 60_000 }))).kind).toBe(
        "existing",
      );
      const taken = await store().claimIdempotencyKey(req({ runId: "run-2", now: T0 + 60_000 }));
      expect(taken.kind).toBe("takenOver");
      if (taken.kind !== "takenOver") return;
      expect(taken.record.runId).toBe("run-1");
      expect(taken.record.lockedUntil).toBe(T0 + 60_000 + LOCK);
      // One taker only.
      expect((await store().claimIdempotencyKey(req({ now: T0 + 60_001 }))).kind).toBe("existing");
      expect(
        await store().renewIdempotencyKey({ key: "nope", fingerprint: "fp-a", now: T0, lockMs: LOCK }),
      ).toBe(false);
    });

    it("after the window the key is free again, and prune deletes expired records only", async () => {
      await store().claimIdempotencyKey(req());
      await store().completeIdempotencyKey({
        key: "k-1",
        fingerprint: "fp-a",
        response: { status: 200, body: "{}" },
        now: T0,
      });
      await store().claimIdempotencyKey(req({ key: "k-late", now: T0 + 1_000 }));
      expect(
        await store().claimIdempotencyKey(req({ fingerprint: "fp-new", runId: "run-9", now: T0 + WINDOW })),
      ).toEqual({ kind: "claimed" });
      expect((await store().getIdempotencyKey("k-1"))?.fingerprint).toBe("fp-new");
      await store().claimIdempotencyKey(req({ key: "k-old", now: T0 - WINDOW }));
      expect(await store().pruneIdempotencyKeys(T0 + 500)).toBe(1);
      expect(await store().getIdempotencyKey("k-old")).toBeUndefined();
      expect(await store().getIdempotencyKey("k-late")).toBeDefined();
      expect(await store().getIdempotencyKey("k-1")).toBeDefined();
    });
  });
}
