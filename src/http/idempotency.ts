// Idempotency-Key on POST/PUT/PATCH/DELETE: the first request runs, a retry with the same key and request is answered from the stored response.
import { hash } from "node:crypto";
import { OkeError } from "../errors.ts";
import { newId } from "../id.ts";
import type { Logger } from "../log/logger.ts";
import type { IdempotencyRecord, IdempotencyStore } from "../store/idempotency-types.ts";
import type { RunRecord } from "../store/types.ts";
import {
  errorReply,
  httpErrors,
  NO_CONTENT,
  okReply,
  SHUTDOWN_RETRY_AFTER_S,
  type Reply,
} from "./envelope.ts";

export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/** How long a running key is locked; renewed every third of it while its request runs. */
export const IDEMPOTENCY_LOCK_MS = 30_000;
/** Default window a key is remembered for (http.idempotencyWindowMs). */
export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000;
const MAX_KEY_LENGTH = 255;
/** Visible ASCII: what a header value can carry unmangled through proxies. */
const KEY_SHAPE = /^[\x21-\x7e]+$/;

export const idempotencyErrors = {
  badKey: () =>
    new OkeError({
      code: "OKE1443",
      status: 400,
      message: `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters.`,
      fix: "Send a UUID (or another unique token) per logical request.",
    }),
  mismatch: () =>
    new OkeError({
      code: "OKE1441",
      status: 422,
      message: "This Idempotency-Key was used for a different request (method, URL or body).",
      fix: "Use a new key for a new request; a retry must repeat the first request exactly.",
    }),
  // Not passing although "retry later": it answers a request that holds no key with another
  // request's running record, which a release (same fingerprint) would delete.
  inProgress: () =>
    new OkeError({
      code: "OKE1442",
      status: 409,
      message: "A request with this Idempotency-Key is still running.",
      fix: "Retry after it finished; the retry then gets its response.",
    }),
} as const;

export interface IdempotencyDeps {
  store: IdempotencyStore & { getRun(runId: string): Promise<RunRecord | undefined> };
  now(): number;
  windowMs: number;
  logger: Logger;
}

type Done = (reply: Reply) => void;
/** A keyed request in flight: its lock is renewed until it finishes. */
interface Held {
  key: string;
  fingerprint: string;
}

/**
 * Identifies a request: method, URL (path and query) and body. The one-shot
 * `hash` (no Hash object) costs a third of createHash().update().digest() for
 * a request-sized input (0.6 against 2.1 µs measured), on every keyed request.
 */
export const fingerprintOf = (method: string, url: string, body: unknown): string =>
  hash("sha256", `${method} ${url}\n${body === undefined ? "" : JSON.stringify(body)}`, "base64url");

/** The header's value, validated; undefined when absent. Throws OKE1443. */
export function idempotencyKeyOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const v = headers["idempotency-key"];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v.length > MAX_KEY_LENGTH || !KEY_SHAPE.test(v))
    throw idempotencyErrors.badKey();
  return v;
}

/** `named`: the answer names the key's run (a durable route's: its `oke-run-id`). */
const replay = (r: IdempotencyRecord, named: boolean): Reply => ({
  status: r.response!.status,
  body: r.response!.body ?? undefined,
  replayed: true,
  ...(named ? { runId: r.runId } : {}),
});

/** A durable run that went on (or finished) without its request: answer from the run itself. */
const fromRun = (run: RunRecord | undefined): Reply | undefined => {
  if (run?.status === "completed") return run.output === undefined ? NO_CONTENT : okReply(run.output);
  if (run?.status === "sleeping") return NO_CONTENT;
  return undefined;
};

export function createIdempotency(deps: IdempotencyDeps) {
  const { store, logger } = deps;
  let lastPrune = Number.NEGATIVE_INFINITY;
  const pruneEvery = Math.min(deps.windowMs, 3_600_000);

  // Pruning rides on requests (no timer to stop): at most once per window or hour, in the background.
  const maybePrune = (now: number): void => {
    if (now - lastPrune < pruneEvery) return;
    lastPrune = now;
    void store.pruneIdempotencyKeys(now).then(
      (n) => n > 0 && logger.debug({ pruned: n }, "idempotency: expired keys pruned"),
      (e: unknown) =>
        logger.warn({ err: e }, "idempotency: pruning expired keys failed; retried within the hour"),
    );
  };

  // One renewal timer for all keyed requests in flight instead of a setInterval each: it runs
  // only while some request holds a lock, and renews each lock every third of it (the first
  // renewal of a request comes within a third of its start).
  const running = new Set<Held>();
  let renewer: ReturnType<typeof setInterval> | undefined;
  /** stop() was called: no lock is renewed from then on. */
  let stopped = false;
  /** abandon() was called (the shutdown deadline): keyed requests still here are answered without their flow. */
  let abandoned = false;
  /** Lapses a key's lock now: a retry takes the record over with its run id, as after a crash. */
  const lapse = (key: string, fingerprint: string): Promise<unknown> =>
    inTurn(key, () => store.renewIdempotencyKey({ key, fingerprint, now: deps.now(), lockMs: 0 }));
  const renewAll = (): void => {
    if (running.size === 0 || stopped) {
      clearInterval(renewer);
      renewer = undefined;
      return;
    }
    const now = deps.now();
    for (const { key, fingerprint } of running)
      inTurn(key, () =>
        store.renewIdempotencyKey({ key, fingerprint, now, lockMs: IDEMPOTENCY_LOCK_MS }),
      ).catch((e: unknown) => logger.warn({ err: e, key }, "idempotency: lock renewal failed"));
  };

  // A key's lock writes from this process go out in turn: a renewal sent while its request ran must
  // land before that request's lapse (a passing refusal) or release. On separate pool connections
  // the renewal could land second and lock the key again for IDEMPOTENCY_LOCK_MS, so every retry in
  // that time got 409 for a request that had already ended.
  const lockWrites = new Map<string, Promise<void>>();
  const inTurn = <T>(key: string, write: () => Promise<T>): Promise<T> => {
    const before = lockWrites.get(key);
    const result = before === undefined ? write() : before.then(write);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    lockWrites.set(key, settled);
    void settled.then(() => {
      if (lockWrites.get(key) === settled) lockWrites.delete(key);
    });
    return result;
  };
  const hold = (h: Held): void => {
    running.add(h);
    if (renewer !== undefined || stopped) return;
    renewer = setInterval(renewAll, IDEMPOTENCY_LOCK_MS / 3);
    renewer.unref();
  };

  // Answers handed to the store whose completion has not settled yet. The answer is sent as soon
  // as its completion is queued: the completion commits asynchronously on PostgreSQL (and resolves
  // before its fsync on the file driver), so waiting for its reply would buy visibility ordering
  // only, never durability — a lost completion is already allowed for (postgres-idempotency.ts).
  // Meanwhile a retry that reaches this instance is answered from here; one that reaches another
  // instance finds the key running (409 OKE1442) for that round trip. drain() waits for them all.
  const completing = new Map<string, { fingerprint: string; reply: Reply; expiresAt: number }>();
  const inFlight = new Set<Promise<void>>();

  /** Ends a keyed request: store its answer (a 5xx frees the key instead, so a retry runs again), then send it. */
  const finish = (
    key: string,
    fingerprint: string,
    runId: string,
    expiresAt: number,
    reply: Reply,
    done: Done,
  ): void => {
    // A passing refusal (OkeError.passing: the run is leased by another holder, say the orphan
    // scan finishing it) is not stored — it would answer every retry — and the key is not freed
    // either: a retry that then claimed it afresh would start a second run under a new id. Its lock
    // lapses instead, so the retry takes the record over with the same run id and gets that run's
    // answer. Awaited, like the release below, so a retry on receipt finds the lock lapsed.
    if (reply.passing === true)
      return answerAfter(
        inTurn(key, () => store.renewIdempotencyKey({ key, fingerprint, now: deps.now(), lockMs: 0 })),
        key,
        reply,
        done,
      );
    // A live stream has no body to store: like a 5xx, the key is freed. The release is awaited:
    // a retry sent on receipt of the 5xx must find the key free and run again, not get 409.
    if (reply.status >= 500 || reply.live !== undefined)
      return answerAfter(
        inTurn(key, () => store.releaseIdempotencyKey({ key, fingerprint })),
        key,
        reply,
        done,
      );
    const response = { status: reply.status, body: reply.body ?? null };
    const entry = {
      fingerprint,
      reply: {
        status: response.status,
        body: response.body ?? undefined,
        replayed: true,
        ...(reply.runId !== undefined ? { runId: reply.runId } : {}),
      },
      expiresAt,
    };
    completing.set(key, entry);
    let pending: Promise<void>;
    try {
      pending = store
        .completeIdempotencyKey({
          key,
          fingerprint,
          response,
          now: deps.now(),
          runId,
          windowMs: deps.windowMs,
        })
        .then(
          (outcome) => {
            // Not an error: the answer went out, and a retry gets it (restored) or the other record's.
            if (outcome === "restored")
              logger.warn(
                { key, runId },
                "idempotency: the key's record was gone when its request finished (it outran the window, or was pruned); its answer is stored anew",
              );
            else if (outcome === "superseded")
              logger.warn(
                { key, runId },
                "idempotency: another request holds the key now (it took the request over, or claimed the key after the window); this answer is not stored",
              );
          },
          (e: unknown) => notStored(e, key),
        )
        .finally(() => {
          // A later request's entry for the key (a takeover in this instance) stays.
          if (completing.get(key) === entry) completing.delete(key);
          inFlight.delete(pending);
        });
    } catch (e) {
      // A store that throws instead of rejecting: the answer still goes out.
      if (completing.get(key) === entry) completing.delete(key);
      notStored(e, key);
      return done(reply);
    }
    inFlight.add(pending);
    done(reply);
  };
  /** Sends `reply` once the key's `write` (a lapse or a release) is done; a failed write is logged and the answer still goes out. */
  const answerAfter = (write: Promise<unknown>, key: string, reply: Reply, done: Done): void => {
    write.then(
      () => done(reply),
      (e: unknown) => {
        notStored(e, key);
        done(reply);
      },
    );
  };
  // The flow ran; its answer still goes out. A retry within the lock window gets 409, after it runs again.
  const notStored = (e: unknown, key: string): void => {
    logger.error({ err: e, key }, "idempotency: could not store the response of a keyed request");
  };

  return {
    /**
     * Runs `run(runId)` for the first request with `key`; answers a retry from
     * the stored response (status and body, `Idempotent-Replayed: true`), a
     * different request with 422 OKE1441, one still running with 409 OKE1442. `named`: the
     * route's flow is durable, so the answers this builds about the key's run carry its id
     * (`Reply.runId`; the flow's own answers come with theirs).
     */
    handle(
      key: string,
      fingerprint: string,
      run: (runId: string, done: Done) => void,
      done: Done,
      fail: (e: unknown) => Reply,
      named = false,
    ): void {
      // Answered here while its completion is on its way to the store (the store would say 409).
      const answer = completing.get(key);
      const now = deps.now();
      if (answer !== undefined && answer.fingerprint === fingerprint && now < answer.expiresAt)
        return done(answer.reply);
      maybePrune(now);
      const fresh = newId(now);
      void store
        .claimIdempotencyKey({
          key,
          fingerprint,
          runId: fresh,
          now,
          lockMs: IDEMPOTENCY_LOCK_MS,
          windowMs: deps.windowMs,
        })
        .then(async (claim) => {
          if (claim.kind === "existing") {
            const r = claim.record;
            if (r.fingerprint !== fingerprint) return done(errorReply(422, idempotencyErrors.mismatch()));
            if (r.status === "running") {
              const busy = errorReply(409, idempotencyErrors.inProgress());
              return done(named ? { ...busy, runId: r.runId } : busy);
            }
            return done(replay(r, named));
          }
          const runId = claim.kind === "claimed" ? fresh : claim.record.runId;
          // The record's window (a claim's from its own now): past it the key is forgotten.
          const expiresAt = claim.kind === "claimed" ? now + deps.windowMs : claim.record.expiresAt;
          if (claim.kind === "takenOver") {
            // The first request's process died; its durable run may have gone on without it.
            const answered = fromRun(await store.getRun(runId));
            if (answered !== undefined)
              return finish(
                key,
                fingerprint,
                runId,
                expiresAt,
                named ? { ...answered, runId } : answered,
                done,
              );
          }
          if (abandoned) {
            // Claimed after the shutdown deadline: the flow is not started, and the key is left to a retry.
            const refusal = httpErrors.shutDown({ durable: false, started: false, keyed: true });
            return answerAfter(
              lapse(key, fingerprint),
              key,
              {
                ...errorReply(503, refusal),
                retryAfter: SHUTDOWN_RETRY_AFTER_S,
                close: true,
              },
              done,
            );
          }
          const held: Held = { key, fingerprint };
          hold(held);
          run(runId, (reply) => {
            // Gone from `running`: abandon() answered the request and lapsed its key; a late outcome
            // (a 5xx as the store closes, say) must not free the key or become its answer.
            if (!running.delete(held)) return done(reply);
            finish(key, fingerprint, runId, expiresAt, reply, done);
          });
        })
        .catch((e: unknown) => done(fail(e)));
    },

    /**
     * The shutdown deadline: every keyed request still running here has been answered without its
     * flow (503 OKE1505). Its lock is lapsed now — a retry on another instance takes the record
     * over with the same run id (a durable run's outcome, or the flow again), as after a crash,
     * rather than waiting up to IDEMPOTENCY_LOCK_MS — and whatever its flow answers later is not
     * stored. stop() waits for these writes.
     */
    abandon(): void {
      abandoned = true;
      stopped = true;
      clearInterval(renewer);
      renewer = undefined;
      for (const { key, fingerprint } of running)
        lapse(key, fingerprint).catch((e: unknown) =>
          logger.warn({ err: e, key }, "idempotency: could not lapse a key's lock at the shutdown deadline"),
        );
      running.clear();
    },

    /** Resolves once every answer handed to the store has been stored (or its failure logged). */
    async drain(): Promise<void> {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },

    /**
     * The app is stopping: no lock renewal goes out from here (the store is about to close), and it
     * resolves once the key writes already sent — renewals, lapses, releases, completions — have landed. A request still running past the
     * shutdown deadline keeps no lock: it lapses as when its process dies, and a retry takes the key
     * over with the same run id (claim "takenOver").
     */
    async stop(): Promise<void> {
      stopped = true;
      clearInterval(renewer);
      renewer = undefined;
      while (lockWrites.size > 0 || inFlight.size > 0)
        await Promise.allSettled([...lockWrites.values(), ...inFlight]);
    },
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
