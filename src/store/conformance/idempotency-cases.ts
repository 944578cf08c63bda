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
        runId: "run-1",
        windowMs: WINDOW,
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
        runId: "run-1",
        windowMs: WINDOW,
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
        runId: "run-1",
        windowMs: WINDOW,
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

    it("a completion reports how it found its key: gone or expired is stored anew, another request's record is left", async () => {
      const complete = (o: { key?: string; fingerprint?: string; now?: number; body?: string }) =>
        store().completeIdempotencyKey({
          key: o.key ?? "k-1",
          fingerprint: o.fingerprint ?? "fp-a",
          response: { status: 201, body: o.body ?? '{"n":1}' },
          now: o.now ?? T0 + 10,
          runId: "run-1",
          windowMs: WINDOW,
        });
      await store().claimIdempotencyKey(req());
      expect(await complete({})).toBe("completed");
      // Done already (a takeover finished first): the record stays as it is.
      expect(await complete({ body: '{"n":2}' })).toBe("superseded");
      expect((await store().getIdempotencyKey("k-1"))?.response).toEqual({ status: 201, body: '{"n":1}' });
      // Pruned while its request ran: stored anew, for a window from now.
      await store().claimIdempotencyKey(req({ key: "k-gone" }));
      expect(await store().pruneIdempotencyKeys(T0 + WINDOW)).toBe(2);
      expect(await complete({ key: "k-gone", now: T0 + WINDOW + 5 })).toBe("restored");
      expect(await store().getIdempotencyKey("k-gone")).toEqual({
        key: "k-gone",
        fingerprint: "fp-a",
        status: "done",
        response: { status: 201, body: '{"n":1}' },
        runId: "run-1",
        lockedUntil: T0 + WINDOW + 5,
        createdAt: T0 + WINDOW + 5,
        expiresAt: T0 + 2 * WINDOW + 5,
      });
      // A retry is answered from it.
      const retry = await store().claimIdempotencyKey(req({ key: "k-gone", now: T0 + WINDOW + 6 }));
      expect(retry.kind === "existing" && retry.record.status).toBe("done");
      // Expired but not pruned yet: the same.
      await store().claimIdempotencyKey(req({ key: "k-old" }));
      expect(await complete({ key: "k-old", now: T0 + WINDOW })).toBe("restored");
      expect((await store().getIdempotencyKey("k-old"))?.expiresAt).toBe(T0 + 2 * WINDOW);
      // Claimed by a different request after the window: left to it.
      await store().claimIdempotencyKey(req({ key: "k-new" }));
      await store().claimIdempotencyKey(
        req({ key: "k-new", fingerprint: "fp-b", runId: "run-2", now: T0 + WINDOW }),
      );
      expect(await complete({ key: "k-new", now: T0 + WINDOW + 1 })).toBe("superseded");
      expect(await store().getIdempotencyKey("k-new")).toMatchObject({
        fingerprint: "fp-b",
        status: "running",
        runId: "run-2",
      });
    });

    it("after the window the key is free again, and prune deletes expired records only", async () => {
      await store().claimIdempotencyKey(req());
      await store().completeIdempotencyKey({
        key: "k-1",
        fingerprint: "fp-a",
        response: { status: 200, body: "{}" },
        now: T0,
        runId: "run-1",
        windowMs: WINDOW,
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
