/** The file engine's queue: messages, per-key order, claims, settles, dead letters, signal stats. */
import { storeErrors } from "../../index.ts";
import type {
  ClaimedMessage,
  ClaimRelease,
  ClaimRequest,
  FailureReason,
  MessageStatus,
  NewMessage,
  ResettleDelivered,
  Settlement,
  SignalStats,
  StoredMessage,
} from "../../types.ts";
import type { EngineSettleResult } from "../../memory/memory-queue.ts";
import { enc, toStored, toClaimed, type MsgRow } from "./sqlite-rows.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";
import { claimCounts, leftClaim } from "../../claim-rules.ts";
import { resettleState } from "../../resettle-rules.ts";
import { stoppedOwner } from "../../wake-rules.ts";

export class SqliteQueue {
  constructor(private readonly b: SqliteBatch) {}

  private msg(id: string): MsgRow | undefined {
    return this.b.get<MsgRow>("SELECT * FROM messages WHERE id = ?", id);
  }

  private saveMsg(m: MsgRow): void {
    this.b.run(
      `UPDATE messages SET status = ?, ready = ?, attempts = ?, failures = ?, locked_by = ?,
         lease_expires_at = ?, updated_at = ? WHERE seq = ?`,
      m.status,
      m.ready,
      m.attempts,
      m.failures,
      m.locked_by,
      m.lease_expires_at,
      m.updated_at,
      m.seq,
    );
  }

  /**
   * Re-derives which message of (signal, key) is claimable — its oldest pending
   * one, if nothing of the key is inflight — by reading all its live messages.
   * For the rare writes that can put an older message ahead of a ready head
   * (an operator replay, a reclaim that must wait behind one).
   */
  private refreshKey(signal: string, key: string): void {
    const live = this.b.all<{ seq: number; status: MessageStatus; ready: number }>(
      `SELECT seq, status, ready FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
         AND status IN ('pending', 'inflight') ORDER BY seq`,
      signal,
      key,
    );
    const busy = live.some((m) => m.status === "inflight");
    let head = true;
    for (const m of live) {
      if (m.status !== "pending") continue;
      const want = !busy && head ? 1 : 0;
      head = false;
      if (m.ready !== want) this.b.run("UPDATE messages SET ready = ? WHERE seq = ?", want, m.seq);
    }
  }

  /**
   * The key's inflight message just settled (delivered, dead, or back to
   * pending): nothing of the key is inflight now and nothing of it was ready,
   * so its oldest pending message — two index probes, not a walk of the
   * key's backlog — becomes the one claimable.
   */
  private advanceKey(signal: string, key: string): void {
    const head = this.b.get<{ seq: number; ready: number }>(
      `SELECT seq, ready FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
         AND status IN ('pending', 'inflight') ORDER BY seq LIMIT 1`,
      signal,
      key,
    );
    if (head === undefined || head.ready === 1) return;
    if (
      this.b.get(
        `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
           AND status = 'inflight' LIMIT 1`,
        signal,
        key,
      ) !== undefined
    )
      return;
    this.b.run(
      `UPDATE messages SET ready = 1 WHERE seq = (SELECT seq FROM messages WHERE signal = ? AND key = ?
         AND key IS NOT NULL AND status = 'pending' ORDER BY seq LIMIT 1)`,
      signal,
      key,
    );
  }

  /** Throws if any message cannot be enqueued; changes nothing. */
  checkEnqueue(messages: readonly NewMessage[]): void {
    const seen = new Set<string>();
    for (const m of messages) {
      if (seen.has(m.id) || this.b.get("SELECT 1 FROM messages WHERE id = ?", m.id) !== undefined)
        throw storeErrors.duplicateMessage(m.id);
      seen.add(m.id);
    }
  }

  /** Inserts messages checked by checkEnqueue (the journal's and schedules' outbox too). */
  insertMessages(messages: readonly NewMessage[], now: number): void {
    // A keyed message is its key's claimable head only if nothing of the key is live (this batch included).
    const busyKeys = new Set<string>();
    for (const m of messages) {
      let ready = 1;
      if (m.key !== null) {
        const k = JSON.stringify([m.signal, m.key]);
        ready =
          busyKeys.has(k) ||
          this.b.get(
            `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
               AND status IN ('pending', 'inflight') LIMIT 1`,
            m.signal,
            m.key,
          ) !== undefined
            ? 0
            : 1;
        busyKeys.add(k);
      }
      this.b.run(
        `INSERT INTO messages (id, signal, key, payload, parent_run_id, status, ready, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
        m.id,
        m.signal,
        m.key,
        enc(m.payload),
        m.parentRunId,
        ready,
        now,
        now,
      );
    }
  }

  enqueue(messages: readonly NewMessage[], now: number): void {
    this.b.check();
    this.checkEnqueue(messages);
    this.b.write(() => this.insertMessages(messages, now));
  }

  claim(req: ClaimRequest): ClaimedMessage[] {
    this.b.check();
    if (req.max <= 0) return [];
    const expired = this.b.all<MsgRow>(
      `SELECT * FROM messages WHERE signal = ? AND status = 'inflight' AND lease_expires_at <= ?
         ORDER BY lease_expires_at, seq LIMIT ?`,
      req.signal,
      req.now,
      req.max,
    );
    const ready = (): MsgRow[] =>
      this.b.all<MsgRow>(
        "SELECT * FROM messages WHERE signal = ? AND ready = 1 ORDER BY seq LIMIT ?",
        req.signal,
        req.max,
      );
    if (
      expired.length === 0 &&
      this.b.get("SELECT 1 FROM messages WHERE signal = ? AND ready = 1", req.signal) === undefined
    )
      return [];
    return this.b.write(() => {
      const picked: MsgRow[] = [];
      for (const m of expired) {
        if (m.key !== null) {
          const older = this.b.get(
            `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND status = 'pending' AND seq < ? LIMIT 1`,
            m.signal,
            m.key,
            m.seq,
          );
          if (older !== undefined) {
            // An operator replayed an older message of this key: it goes first, this one waits behind it.
            m.status = "pending";
            m.locked_by = null;
            m.lease_expires_at = null;
            m.updated_at = req.now;
            m.ready = 0;
            this.saveMsg(m);
            this.refreshKey(m.signal, m.key);
            continue;
          }
        }
        picked.push(m);
      }
      if (picked.length < req.max)
        for (const m of ready()) {
          if (picked.length >= req.max) break;
          picked.push(m);
        }
      return picked.map((m) => {
        m.status = "inflight";
        m.ready = 0;
        m.attempts += claimCounts(m.locked_by);
        m.locked_by = req.worker;
        m.lease_expires_at = req.now + req.leaseMs;
        m.updated_at = req.now;
        this.saveMsg(m);
        return toClaimed(m);
      });
    });
  }

  settle(settlements: readonly Settlement[], now: number): EngineSettleResult {
    this.b.check();
    const rows = settlements.map((s) => this.msg(s.id));
    const live = settlements.some((s, i) => {
      const m = rows[i];
      return (
        m !== undefined && m.status === "inflight" && m.locked_by === s.worker && m.attempts === s.attempt
      );
    });
    if (!live) return { applied: [], signals: [] };
    return this.b.write(() => {
      const applied: string[] = [];
      const signals = new Set<string>();
      for (const s of settlements) {
        const m = this.msg(s.id);
        // Fencing: only the current holder of this very attempt may settle.
        if (
          m === undefined ||
          m.status !== "inflight" ||
          m.locked_by !== s.worker ||
          m.attempts !== s.attempt
        )
          continue;
        if (s.failure !== undefined) {
          const failures = JSON.parse(m.failures) as FailureReason[];
          const f = s.failure;
          failures.push({ code: f.code, message: f.message, at: f.at, attempt: f.attempt });
          m.failures = JSON.stringify(failures);
        }
        m.status = s.status;
        m.locked_by = null;
        m.lease_expires_at = null;
        m.updated_at = now;
        m.ready = s.status === "pending" && m.key === null ? 1 : 0;
        this.saveMsg(m);
        if (m.key !== null) this.advanceKey(m.signal, m.key);
        applied.push(m.id);
        // Only a settle that makes work claimable is announced (StoreEvent "settled").
        if (s.status === "pending" || m.key !== null) signals.add(m.signal);
      }
      return { applied, signals: [...signals] };
    });
  }

  /**
   * Claims given back unstarted: back to pending as if never claimed (attempts - 1), fenced like
   * settle. A keyed one keeps its seq, so advanceKey makes it its key's claimable head again.
   */
  releaseClaimed(claims: readonly ClaimRelease[], now: number): EngineSettleResult {
    this.b.check();
    const held = (c: ClaimRelease, m: MsgRow | undefined): m is MsgRow =>
      m !== undefined && m.status === "inflight" && m.locked_by === c.worker && m.attempts === c.attempt;
    // Read first: a release that finds nothing held opens no write (and costs no commit).
    if (!claims.some((c) => held(c, this.msg(c.id)))) return { applied: [], signals: [] };
    return this.b.write(() => {
      const released: string[] = [];
      const signals = new Set<string>();
      for (const c of claims) {
        const m = this.msg(c.id);
        if (!held(c, m)) continue;
        m.status = "pending";
        m.attempts--;
        m.locked_by = null;
        m.lease_expires_at = null;
        m.updated_at = now;
        m.ready = m.key === null ? 1 : 0;
        this.saveMsg(m);
        if (m.key !== null) this.advanceKey(m.signal, m.key);
        released.push(m.id);
        signals.add(m.signal);
      }
      return { applied: released, signals: [...signals] };
    });
  }

  /**
   * A graceful stop's claims still running: holder `<worker>#stopped`, attempts and lease kept
   * (claim-rules leftClaim). The row stays inflight, so its key stays held.
   */
  leaveClaimsToLease(claims: readonly ClaimRelease[], now: number): string[] {
    this.b.check();
    const where = (c: ClaimRelease, m: MsgRow | undefined): "held" | "already" | "gone" =>
      m === undefined
        ? "gone"
        : leftClaim({ status: m.status, lockedBy: m.locked_by, attempts: m.attempts }, c);
    const left = new Set<string>();
    // Read first: a retry that finds every mark made opens no write (and costs no commit).
    const held = claims.filter((c) => {
      const at = where(c, this.msg(c.id));
      if (at === "already") left.add(c.id);
      return at === "held";
    });
    if (held.length > 0)
      this.b.write(() => {
        for (const c of held) {
          const m = this.msg(c.id);
          if (where(c, m) !== "held") continue;
          m!.locked_by = stoppedOwner(c.worker);
          m!.updated_at = now;
          this.saveMsg(m!);
          left.add(c.id);
        }
      });
    return [...new Set(claims.map((c) => c.id))].filter((id) => left.has(id));
  }

  private dead(signal: string, limit: number): MsgRow[] {
    return this.b.all<MsgRow>(
      "SELECT * FROM messages WHERE signal = ? AND status = 'dead' ORDER BY created_at, seq LIMIT ?",
      signal,
      limit,
    );
  }

  deadLetters(signal: string, limit?: number): StoredMessage[] {
    this.b.check();
    return this.dead(signal, limit === undefined ? -1 : Math.max(0, limit)).map(toStored);
  }

  getMessage(id: string): StoredMessage | undefined {
    this.b.check();
    const m = this.msg(id);
    return m === undefined ? undefined : toStored(m);
  }

  private deadTargets(signal: string, ids: readonly string[] | "all"): MsgRow[] {
    if (ids === "all") return this.dead(signal, -1);
    const out: MsgRow[] = [];
    for (const id of new Set(ids)) {
      const m = this.msg(id);
      if (m !== undefined && m.signal === signal && m.status === "dead") out.push(m);
    }
    return out;
  }

  /** Dead -> pending with attempts and lock reset; the failure history is kept. */
  replay(signal: string, ids: readonly string[] | "all", now: number): string[] {
    this.b.check();
    const targets = this.deadTargets(signal, ids);
    if (targets.length === 0) return [];
    return this.b.write(() => {
      const keys = new Set<string>();
      for (const m of targets) {
        m.status = "pending";
        m.attempts = 0;
        m.locked_by = null;
        m.lease_expires_at = null;
        m.updated_at = now;
        m.ready = m.key === null ? 1 : 0;
        this.saveMsg(m);
        this.b.run("UPDATE messages SET replays = replays + 1 WHERE seq = ?", m.seq);
        if (m.key !== null) keys.add(m.key);
      }
      for (const k of keys) this.refreshKey(signal, k);
      return targets.map((m) => m.id);
    });
  }

  /**
   * A delivered message settled again (resettle-rules). It keeps its seq, so a pending one rejoins
   * its key where it was emitted (refreshKey, as a replay); a pruned one is inserted anew.
   */
  resettleDelivered(r: ResettleDelivered, now: number): { applied: boolean; signals: string[] } {
    this.b.check();
    const found = this.msg(r.message.id);
    if (found !== undefined) {
      const state = resettleState({ ...found, failures: JSON.parse(found.failures) as FailureReason[] }, r);
      if (state !== "open") return { applied: state === "already", signals: [] };
    }
    return this.b.write(() => {
      const { id, signal, key } = r.message;
      if (found === undefined) {
        this.insertMessages([r.message], now);
        this.b.run("UPDATE messages SET replays = ? WHERE id = ?", r.replays ?? 0, id);
      }
      const m = this.msg(id)!;
      const failures = JSON.parse(m.failures) as FailureReason[];
      const f = r.failure;
      failures.push({ code: f.code, message: f.message, at: f.at, attempt: f.attempt });
      m.failures = JSON.stringify(failures);
      m.status = r.status;
      m.attempts = r.attempts;
      m.locked_by = null;
      m.lease_expires_at = null;
      m.updated_at = now;
      m.ready = r.status === "pending" && key === null ? 1 : 0;
      this.saveMsg(m);
      if (key !== null) this.refreshKey(signal, key);
      return { applied: true, signals: r.status === "pending" ? [signal] : [] };
    });
  }

  discard(signal: string, ids: readonly string[] | "all"): string[] {
    this.b.check();
    const targets = this.deadTargets(signal, ids);
    if (targets.length === 0) return [];
    return this.b.write(() => {
      for (const m of targets) this.b.run("DELETE FROM messages WHERE seq = ?", m.seq);
      return targets.map((m) => m.id);
    });
  }

  /** Pending messages removed by an operator; each key touched gets its head marked ready again. */
  discardPending(signal: string, ids: readonly string[]): string[] {
    this.b.check();
    const targets: MsgRow[] = [];
    for (const id of new Set(ids)) {
      const m = this.msg(id);
      if (m !== undefined && m.signal === signal && m.status === "pending") targets.push(m);
    }
    if (targets.length === 0) return [];
    return this.b.write(() => {
      const keys = new Set<string>();
      for (const m of targets) {
        this.b.run("DELETE FROM messages WHERE seq = ?", m.seq);
        if (m.key !== null) keys.add(m.key);
      }
      for (const k of keys) this.refreshKey(signal, k);
      return targets.map((m) => m.id);
    });
  }

  stats(signal: string, now: number): SignalStats {
    this.b.check();
    const counts = new Map(
      this.b
        .all<{ status: MessageStatus; n: number }>(
          "SELECT status, count(*) AS n FROM messages WHERE signal = ? GROUP BY status",
          signal,
        )
        .map((r) => [r.status, r.n]),
    );
    const oldest = this.b.get<{ created_at: number }>(
      "SELECT created_at FROM messages WHERE signal = ? AND status = 'pending' ORDER BY created_at, seq LIMIT 1",
      signal,
    );
    // Migration 0005's partial index: only delivered rows with a failure are in it.
    const failed = this.b.get<{ n: number }>(
      "SELECT count(*) AS n FROM messages WHERE signal = ? AND status = 'delivered' AND failures <> '[]'",
      signal,
    );
    return {
      signal,
      pending: counts.get("pending") ?? 0,
      inflight: counts.get("inflight") ?? 0,
      dead: counts.get("dead") ?? 0,
      delivered: counts.get("delivered") ?? 0,
      deliveredFailed: failed?.n ?? 0,
      oldestPendingAgeMs: oldest === undefined ? null : Math.max(0, now - oldest.created_at),
    };
  }

  nextLeaseExpiry(signal: string): number | null {
    this.b.check();
    return (
      this.b.get<{ t: number }>(
        `SELECT lease_expires_at AS t FROM messages WHERE signal = ? AND status = 'inflight'
           ORDER BY lease_expires_at LIMIT 1`,
        signal,
      )?.t ?? null
    );
  }

  /**
   * A durable consumer's message delivered at its run's park is kept while that run (its id, or its
   * replay's `<id>.r<n>`) is unfinished: a failure after the wake settles it again (resettleDelivered).
   */
  /** Deletes up to `limit` delivered messages last updated before `before` (all without a limit). */
  pruneDelivered(before: number, limit = -1): number {
    this.b.check();
    const prunable = `status = 'delivered' AND updated_at < ? AND NOT EXISTS (
      SELECT 1 FROM runs r WHERE r.id IN (messages.id, messages.id || '.r' || messages.replays)
        AND r.status IN ('running', 'sleeping', 'compensating'))`;
    if (this.b.get(`SELECT 1 FROM messages WHERE ${prunable} LIMIT 1`, before) === undefined) return 0;
    // LIMIT -1 is no limit in SQLite.
    return this.b.write(() =>
      this.b.run(
        `DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE ${prunable} LIMIT ?)`,
        before,
        limit,
      ),
    );
  }
}
