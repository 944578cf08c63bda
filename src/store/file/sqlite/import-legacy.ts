/** One-time import of a `.oke` directory of the old format (journal.json + journal.log) into store.db. */
import { access, rename } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../../log/logger.ts";
import { MemoryEngine, applyOp, type EngineOp, type EngineSnapshot } from "../../memory/index.ts";
import { fileStoreErrors } from "../file-errors.ts";
import { LOG_FILE, SNAPSHOT_FILE, recover } from "../recovery.ts";
import { fsyncDir } from "../durable-fs.ts";
import { runDeadline } from "../../wake-rules.ts";
import type { SqliteDb } from "./sqlite-db.ts";

/** Suffix the old files get once their state is in store.db; they are kept, never deleted. */
export const IMPORTED_SUFFIX = ".imported";

export interface LegacyImport {
  runs: number;
  messages: number;
  /** Log records replayed on top of the old snapshot. */
  replayed: number;
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/**
 * If `dir` holds the old format, loads it with the old recovery (snapshot +
 * log replay, torn tail cut) and writes the whole state into `db` in one
 * transaction that also records the import (meta `legacy_import`). Then the
 * old files are renamed `*.imported`. A crash before the commit imports again
 * on the next open; after it, only the renames are redone.
 */
export async function importLegacy(
  dir: string,
  db: SqliteDb,
  logger?: Pick<Logger, "info" | "warn">,
): Promise<LegacyImport | undefined> {
  const files = [SNAPSHOT_FILE, LOG_FILE];
  const present = (await Promise.all(files.map((f) => exists(join(dir, f))))).some(Boolean);
  if (!present) return undefined;
  const done = db.prepare("SELECT v FROM meta WHERE k = 'legacy_import'").get() !== undefined;
  let result: LegacyImport | undefined;
  if (!done) {
    const rec = await recover(dir);
    let engine: MemoryEngine;
    try {
      engine =
        rec.state === undefined ? new MemoryEngine() : MemoryEngine.restore(rec.state as EngineSnapshot);
    } catch (e) {
      throw fileStoreErrors.corrupt(dir, "journal.json does not restore", e);
    }
    rec.records.forEach((record, i) => {
      try {
        if (typeof (record as { op?: unknown } | null)?.op !== "string") throw new Error("not an engine op");
        applyOp(engine, record as EngineOp);
      } catch (e) {
        throw fileStoreErrors.corrupt(dir, `record ${i + 1} of journal.log does not replay`, e);
      }
    });
    if (rec.dropped)
      logger?.warn(
        { dir, ...rec.dropped },
        `file store: cut ${rec.dropped.bytes} bytes of ${rec.dropped.reason} log tail of the old journal.log`,
      );
    const snap = engine.snapshot();
    db.transaction(() => writeSnapshot(db, snap))();
    result = { runs: snap.runs.length, messages: snap.messages.length, replayed: rec.records.length };
    logger?.info(
      { dir, ...result },
      `file store: imported the old journal.json/journal.log (${result.runs} runs, ${result.messages} messages) into store.db; the old files are kept as *${IMPORTED_SUFFIX}`,
    );
  }
  for (const f of files)
    if (await exists(join(dir, f))) await rename(join(dir, f), join(dir, f + IMPORTED_SUFFIX));
  await fsyncDir(dir);
  return result;
}

const enc = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));

/** Writes a whole MemoryEngine snapshot into an empty (freshly migrated) database. */
export function writeSnapshot(db: SqliteDb, snap: EngineSnapshot): void {
  const msg = db.prepare(
    `INSERT INTO messages (seq, id, signal, key, payload, parent_run_id, status, ready, attempts, failures,
       locked_by, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
  );
  for (const m of snap.messages)
    msg.run(
      m.seq,
      m.id,
      m.signal,
      m.key,
      enc(m.payload),
      m.parentRunId,
      m.status,
      m.attempts,
      JSON.stringify(m.failures),
      m.lockedBy,
      m.leaseExpiresAt,
      m.createdAt,
      m.updatedAt,
    );
  // Claimable: unkeyed pending, and each free key's oldest pending message.
  db.exec(`UPDATE messages SET ready = 1 WHERE status = 'pending' AND (key IS NULL OR (
    NOT EXISTS (SELECT 1 FROM messages o WHERE o.signal = messages.signal AND o.key = messages.key AND o.status = 'inflight')
    AND seq = (SELECT min(seq) FROM messages o WHERE o.signal = messages.signal AND o.key = messages.key AND o.status = 'pending')))`);
  // Emit order continues after the old engine's counter (pruned messages' numbers are not reused).
  db.prepare("DELETE FROM sqlite_sequence WHERE name = 'messages'").run();
  db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', ?)").run(
    Math.max(snap.nextSeq - 1, snap.messages.at(-1)?.seq ?? 0, 0),
  );

  const run = db.prepare(
    `INSERT INTO runs (id, flow, status, input, output, error, parent_run_id, lease_owner, lease_expires_at,
       wake_at, deadline, status_seq, recoveries, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const entry = db.prepare(
    `INSERT INTO journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  snap.runs.forEach((r, i) => {
    // The engines' own rule (a reserved sleeper is due to others once its wake and its reservation
    // have both passed), not a copy of it; the restored record carries recoveries (0 when the old
    // snapshot predates them).
    run.run(
      r.id,
      r.flow,
      r.status,
      enc(r.input),
      enc(r.output),
      r.error === undefined ? null : JSON.stringify(r.error),
      r.parentRunId,
      r.leaseOwner,
      r.leaseExpiresAt,
      r.wakeAt,
      runDeadline(r),
      i + 1,
      r.recoveries,
      r.createdAt,
      r.updatedAt,
    );
    for (const e of r.entries) {
      // Sleeps journaled before sleeps had a label carried it in `name`.
      const name = e.kind === "sleep" ? (e.label ?? (e as unknown as { name: string }).name) : e.name;
      entry.run(
        r.id,
        e.seq,
        e.kind,
        name,
        enc(e.value),
        e.error === undefined ? null : JSON.stringify(e.error),
        e.kind === "sleep" ? e.duration : null,
        e.kind === "sleep" ? e.wakeAt : null,
        e.at,
      );
    }
  });

  const inst = db.prepare("INSERT INTO instances (id, started_at, seen_at, doc) VALUES (?, ?, ?, ?)");
  for (const i of snap.console?.instances ?? []) inst.run(i.id, i.startedAt, i.seenAt, JSON.stringify(i));
  const audit = db.prepare("INSERT INTO audit (id, doc) VALUES (?, ?)");
  for (const a of snap.console?.audit ?? []) audit.run(a.id, JSON.stringify(a));

  const sched = db.prepare("INSERT INTO schedules (name, last_slot, doc) VALUES (?, ?, ?)");
  for (const s of snap.schedules?.records ?? []) sched.run(s.name, s.lastSlot, JSON.stringify(s));
  const fire = db.prepare(
    "INSERT INTO schedule_fires (name, slot, fired_at, missed_runs, message_id) VALUES (?, ?, ?, ?, ?)",
  );
  for (const f of snap.schedules?.fires ?? []) fire.run(f.name, f.slot, f.firedAt, f.missedRuns, f.messageId);

  const idem = db.prepare(
    `INSERT INTO idempotency_keys (key, fingerprint, status, response, run_id, locked_until, created_at, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  for (const k of snap.idempotency ?? [])
    idem.run(
      k.key,
      k.fingerprint,
      k.status,
      k.response === null ? null : JSON.stringify(k.response),
      k.runId,
      k.lockedUntil,
      k.createdAt,
      k.expiresAt,
    );

  const tape = db.prepare(
    "INSERT INTO tape_entries (signal, key, position, id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  for (const t of snap.tapes?.tapes ?? [])
    for (const e of t.entries) tape.run(e.signal, e.key, e.position, e.id, enc(e.payload), e.createdAt);
  const meta = db.prepare(
    "INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
  );
  if ((snap.tapes?.last ?? 0) > 0) meta.run("tape_last", snap.tapes!.last);
  meta.run("legacy_import", Date.now());
}
