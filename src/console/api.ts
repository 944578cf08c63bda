/** The Console's JSON API: one handler per endpoint over the operator API and the store's Console listings. */
import { ClockResourceNotFoundError, JournalLeaseBusy, OkeError } from "../errors.ts";
import type { AuditEntry } from "../store/console-types.ts";
import { clockSignalName } from "../clock/schedule.ts";
import { holdFix } from "../durable/mismatch-log.ts";
import { settleTerminatedMessage, TERMINATED, terminatedError } from "../durable/terminate.ts";
import { leased, leaseLive } from "../store/wake-rules.ts";
import { decodeAuditCursor, decodeCursor, decodeSeqCursor } from "../store/console-cursor.ts";
import { broadcastQueue } from "../signal/broadcast-runtime.ts";
import {
  entryName,
  type MessageStatus,
  type RunRecord,
  type RunStatus,
  type SignalStats,
  type StoredMessage,
} from "../store/types.ts";
import { attemptHistory } from "./attempt-history.ts";
import { ALIVE_MS, roleOf } from "./heartbeat.ts";
import type { ConsoleHost } from "./host.ts";
import type { ReplayJobs } from "./replay-jobs.ts";
import { sharedRead } from "./shared-read.ts";
import {
  BROADCAST_QUEUE_PREFIX,
  STRANDED_CLOCK_FIX,
  strandedClocks,
  strandedRun,
  strandedView,
} from "./stranded-work.ts";
import { runDetail, summary } from "./timeline.ts";

export interface ApiRequest {
  params: Record<string, string | undefined>;
  query: URLSearchParams;
  body: unknown;
  actor: string;
}

export interface ApiDeps {
  host: ConsoleHost;
  jobs: ReplayJobs;
  /** Records an operator action in the store's audit log (and the log line, without payloads). */
  audit: (entry: Omit<AuditEntry, "at">) => Promise<void>;
}

export type ApiHandler = (deps: ApiDeps, req: ApiRequest) => Promise<{ status?: number; body: unknown }>;

const MESSAGE_STATUSES: readonly MessageStatus[] = ["pending", "inflight", "dead", "delivered"];
const RUN_STATUSES: Record<RunStatus, true> = {
  running: true,
  sleeping: true,
  compensating: true,
  completed: true,
  failed: true,
};
/** Ids one replay/discard call may name. */
const MAX_IDS = 10_000;
/**
 * Dead letters one `all: true` replay or discard takes (oldest first); the answer says `more` when
 * others remain. A property so tests can lower it.
 */
export const replayLimits = { all: 100_000 };
const THROUGHPUT_MINUTES = 10;
/** Dead letters, and failed runs, the overview shows. */
const RECENT_FAILURES = 10;
/** Held-back runs the overview lists (newest first); it reads one more to tell whether there are others. */
const HELD_SHOWN = 20;

/**
 * Held-back runs the overview counts per flow when more are held back than it lists (pages of up to
 * 500, newest first); past them the flows' `held` counts are of the newest ones only. A property so
 * tests can lower it.
 */
export const heldLimits = { counted: 1_000 };

/**
 * Held-back runs per flow and status (running or compensating: counted in the flow's `runs` too), and
 * whether every one was counted. The overview's page of HELD_SHOWN + 1 holds them all unless there
 * are more: only then are more read.
 */
async function heldCounts(
  host: ConsoleHost,
  shown: readonly RunRecord[],
): Promise<{ byFlow: Map<string, Partial<Record<RunStatus, number>>>; all: boolean }> {
  let runs = shown;
  let all = true;
  if (shown.length > HELD_SHOWN) {
    const read: RunRecord[] = [];
    let cursor: string | null = null;
    do {
      const limit = Math.min(500, heldLimits.counted - read.length);
      const page = await host.store.pageRuns({ held: true, cursor, limit });
      read.push(...page.items);
      cursor = page.next;
    } while (cursor !== null && read.length < heldLimits.counted);
    runs = read;
    all = cursor === null;
  }
  const byFlow = new Map<string, Partial<Record<RunStatus, number>>>();
  for (const r of runs) {
    const counts = byFlow.get(r.flow) ?? {};
    counts[r.status] = (counts[r.status] ?? 0) + 1;
    byFlow.set(r.flow, counts);
  }
  return { byFlow, all };
}

/** The overview's advice for the held-back runs it shows: each reason's fix once, named by its code when there are several. */
function heldBackFix(runs: readonly RunRecord[]): string {
  const codes = [...new Set(runs.flatMap((r) => (r.held === undefined ? [] : [r.held.code])))];
  const fixes = codes.flatMap((code) => {
    const fix = holdFix(code);
    return fix === null ? [] : [{ code, fix }];
  });
  if (fixes.length === 0) return "Each waits with no holder, untouched, until an instance takes it again.";
  return fixes.length === 1 ? fixes[0]!.fix : fixes.map((f) => `${f.code}: ${f.fix}`).join(" ");
}
/** Clocks fire on once signals named `clock:<name>`. */
const CLOCK_PREFIX = clockSignalName("");

export const badRequest = (message: string): OkeError =>
  new OkeError({ code: "OKE1605", message: `console: ${message}`, status: 400 });
export const notFound = (message: string): OkeError =>
  new OkeError({ code: "OKE1606", message: `console: ${message}`, status: 404 });

/** 409 OKE1611: the run cannot be terminated now (someone holds it) or at all (it has ended). */
const runRefused = (message: string): OkeError =>
  new OkeError({ code: "OKE1611", message: `console: ${message}`, status: 409 });

/** 501 OKE1612: a store without the optional terminateRun (a third-party driver). */
const cannotTerminate = (driver: string): OkeError =>
  new OkeError({
    code: "OKE1612",
    message: `console: the app's store (driver "${driver}") cannot terminate runs: it has no terminateRun`,
    status: 501,
    // What the store can do, not an internal fault: said to the operator as it is.
    expose: true,
  });

/**
 * A discard of dead letters, or (`pending`) of pending messages: a signal removed from the code keeps
 * its queue, and nothing else removes it. Inflight messages are never touched.
 */
async function discardIn(
  { host, audit }: ApiDeps,
  { params, body, actor }: ApiRequest,
  status: ActedStatus,
): ReturnType<ApiHandler> {
  const signal = await storedSignal(host, params.signal);
  const b = bodyObject(body);
  const target = targetOf(b);
  const dryRun = flagOf(b, "dryRun");
  const pending = status === "pending";
  const discardPending = host.store.discardPending?.bind(host.store);
  if (pending && discardPending === undefined) throw cannotDiscardPending(host.store.driver);
  const mode = pending ? { pending: true } : {};
  const picked = await pick(host, signal, target, dryRun, status);
  if (dryRun) {
    await audit({
      actor,
      action: "discard",
      target: `signal:${signal}`,
      detail: { dryRun: true, ...mode, all: target === "all", count: picked.ids.length },
    });
    return {
      body: {
        dryRun: true,
        ...mode,
        wouldDiscard: picked.ids,
        count: picked.ids.length,
        more: picked.more,
        skipped: picked.skipped,
        backlog: await backlogOf(host, signal),
      },
    };
  }
  // As for replay: "all" is the ids picked above, at most replayLimits.all of them.
  // The store's discard, not the operator API's: that one serves declared signals only, and storedSignal
  // above has already admitted this queue (declared, or undeclared with messages still stored).
  const discarded =
    picked.ids.length === 0
      ? []
      : discardPending !== undefined && pending
        ? await discardPending(signal, picked.ids)
        : await host.store.discard(signal, picked.ids);
  await audit({
    actor,
    action: "discard",
    target: `signal:${signal}`,
    detail: { ...mode, all: target === "all", count: discarded.length, ids: discarded.slice(0, 100) },
  });
  return {
    body: {
      ...mode,
      discarded,
      count: discarded.length,
      more: picked.more,
      skipped: target === "all" ? [] : without(target, discarded),
      backlog: await backlogOf(host, signal),
    },
  };
}

/** The slowest paced replay: one message an hour. */
const MIN_RATE = 1 / 3600;

/** 501 OKE1614: a store without the optional discardPending (a third-party driver). */
const cannotDiscardPending = (driver: string): OkeError =>
  new OkeError({
    code: "OKE1614",
    message: `console: the app's store (driver "${driver}") cannot discard pending messages: it has no discardPending`,
    status: 501,
    // What the store can do, not an internal fault: said to the operator as it is.
    expose: true,
  });

/** The longest reason an operator may give for a terminate. */
const MAX_REASON = 500;

/** A terminate's optional `{ reason }`: a string of at most MAX_REASON characters; none without a body. */
function reasonOf(body: unknown): string | undefined {
  if (body === undefined || body === null) return undefined;
  const reason = bodyObject(body).reason;
  if (reason === undefined) return undefined;
  if (typeof reason !== "string" || reason.length > MAX_REASON)
    throw badRequest(`"reason" must be a string of at most ${MAX_REASON} characters`);
  return reason.trim() === "" ? undefined : reason;
}

/**
 * Whether an operator's terminate would end the run now (JournalStore.terminateRun's rule): a sleeper
 * no one reserved, or a running or compensating run with no live lease. False when the store has none.
 */
const terminable = (host: ConsoleHost, run: RunRecord): boolean =>
  host.store.terminateRun !== undefined &&
  (run.status === "sleeping" || leased(run.status)) &&
  !leaseLive(run, host.clock.now());

function limitOf(q: URLSearchParams, dflt = 50, max = 500): number {
  const v = q.get("limit");
  if (v === null) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw badRequest(`limit must be an integer from 1 to ${max}, got "${v}"`);
  return n;
}

/**
 * `?cursor=`: a previous page's `next`, which `decode` (the rule the drivers seek with) must read;
 * absent is the first page. Anything else is refused rather than passed on: a driver reads a cursor
 * it cannot decode as none, so a script paging with a damaged cursor would loop on page 1. An empty
 * one too: a script whose cursor variable came out empty would start again at page 1, forever.
 */
function cursorOf(q: URLSearchParams, decode: (cursor: string) => unknown): string | null {
  const v = q.get("cursor");
  if (v === "")
    throw badRequest(
      'cursor is empty: pass the "next" of a previous page, or leave cursor out for the first page',
    );
  if (v !== null && decode(v) === undefined)
    throw badRequest(`cursor must be the "next" of a previous page, got "${v}"`);
  return v;
}

function timeOf(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  const n = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
  if (!Number.isFinite(n)) throw badRequest(`${name} must be epoch ms or an ISO date, got "${v}"`);
  return n;
}

/**
 * 404 OKE1613: a broadcast or live signal has no queue of its own to list or act on. Not OKE1605 (the
 * request is well formed) nor OKE1606 (the signal exists): the answer says where its events are.
 */
const noQueue = (message: string): OkeError =>
  new OkeError({ code: "OKE1613", message: `console: ${message}`, status: 404 });

function onceSignal(host: ConsoleHost, name: string | undefined): string {
  const s = host.manifest.signals.find((x) => x.name === name);
  if (!s) throw notFound(`no signal named "${name ?? ""}" in this app`);
  if (s.delivery === "broadcast")
    throw noQueue(
      `"${s.name}" is a broadcast signal: it has no queue of its own; each subscribed flow's copies are a queue of their own, ` +
        `listed under the signal (GET /api/signals/${s.name}: copies[].queue), whose messages can be read (GET /api/signals/<queue>/messages)`,
    );
  if (s.delivery === "live")
    throw noQueue(
      `"${s.name}" is a live signal: it keeps a tape of entries, not a queue of messages, and the Console does not list tapes; ` +
        "its entries are read by app.live() or a route returning fx.live() (docs/signals.md)",
    );
  return s.name;
}

/**
 * The declared broadcast signal and flow a copies queue (`~broadcast:<signal>:<flow>`) belongs to, or
 * undefined. Matched against the declared signals, not split at a colon: names may hold colons.
 */
function copiesOf(host: ConsoleHost, name: string): { signal: string; flow: string } | undefined {
  for (const s of host.manifest.signals) {
    if (s.delivery !== "broadcast") continue;
    const prefix = broadcastQueue(s.name, "");
    if (name.startsWith(prefix) && name.length > prefix.length)
      return { signal: s.name, flow: name.slice(prefix.length) };
  }
  return undefined;
}

/**
 * The queue a read or a discard acts on: a once signal this app declares, or one it no longer declares
 * that still has messages in the store — a worker or signal removed in a deploy leaves its pending
 * messages and dead letters behind, and an operator must be able to see and clear them. Replays stay
 * with declared signals (onceSignal): they queue work for a worker, so the app should know it.
 */
async function storedSignal(
  host: ConsoleHost,
  name: string | undefined,
  read: "read" | "act" = "act",
): Promise<string> {
  if (host.manifest.signals.some((x) => x.name === name)) return onceSignal(host, name);
  // A broadcast's copies of one flow: readable (what each copy came to), never acted on — a copy
  // is one attempt, and the runtime settles it.
  if (read === "read" && name !== undefined && copiesOf(host, name) !== undefined) return name;
  if (name !== undefined && name !== "" && !name.startsWith(BROADCAST_QUEUE_PREFIX)) {
    const st = await host.store.stats(name, host.clock.now());
    if (st.pending + st.inflight + st.dead + st.delivered > 0) return name;
  }
  throw notFound(`no signal named "${name ?? ""}" in this app`);
}

function bodyObject(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw badRequest("the request body must be a JSON object");
  return body as Record<string, unknown>;
}

/** `{ ids: [...] }` or `{ all: true }`, exactly one. */
function targetOf(body: Record<string, unknown>): string[] | "all" {
  const { ids, all } = body;
  if (all === true && ids === undefined) return "all";
  if (all !== undefined && all !== false) throw badRequest('give either "ids" or "all": true, not both');
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((x) => typeof x === "string" && x !== ""))
    throw badRequest('"ids" must be a non-empty array of message ids (or send "all": true)');
  if (ids.length > MAX_IDS) throw badRequest(`at most ${MAX_IDS} ids per call (send "all": true for more)`);
  return [...new Set(ids as string[])];
}

function flagOf(body: Record<string, unknown>, name: string): boolean {
  const v = body[name];
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw badRequest(`"${name}" must be true or false`);
  return v;
}

/** What a replay or discard acts on: dead letters, or (a discard with `pending`) pending messages. */
type ActedStatus = "dead" | "pending";

/** Ids of the signal's messages in `status` (dead letters, or pending messages), oldest first, up to `cap`. */
async function idsIn(
  host: ConsoleHost,
  signal: string,
  status: ActedStatus,
  cap: number,
): Promise<{ ids: string[]; more: boolean }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  while (ids.length < cap) {
    const page = await host.store.pageMessages({
      signal,
      status,
      cursor,
      limit: Math.min(500, cap - ids.length),
    });
    for (const m of page.items) ids.push(m.id);
    if (page.next === null) return { ids, more: false };
    cursor = page.next;
  }
  return { ids, more: true };
}

/**
 * The dead letters a call acts on: "all" is the oldest `replayLimits.all`; named ids are those still
 * dead when `check` (a dry run, a paced job), else all of them (the store skips the others itself).
 */
async function pick(
  host: ConsoleHost,
  signal: string,
  target: string[] | "all",
  check: boolean,
  status: ActedStatus = "dead",
): Promise<{ ids: string[]; more: boolean; skipped: string[] }> {
  if (target === "all") return { ...(await idsIn(host, signal, status, replayLimits.all)), skipped: [] };
  if (!check) return { ids: target, more: false, skipped: [] };
  const ids = await stillIn(host, signal, status, target);
  return { ids, more: false, skipped: without(target, ids) };
}

/** `named` less `done`, in the caller's order. */
const without = (named: readonly string[], done: readonly string[]): string[] => {
  const hit = new Set(done);
  return named.filter((id) => !hit.has(id));
};

/** Which of `ids` are messages of `signal` in `status` right now. */
async function stillIn(
  host: ConsoleHost,
  signal: string,
  status: ActedStatus,
  ids: readonly string[],
): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) {
    const m = await host.store.getMessage(id);
    if (m?.signal === signal && m.status === status) out.push(id);
  }
  return out;
}

/**
 * A discard's (and a replay's) word on the queue's messages that are not dead letters, which a discard
 * never touches and a replay adds to: how many are pending and inflight, whether a live instance consumes the signal (the overview's stranded rule;
 * null when no instance is live, as nothing is judged then), and whether this app declares it.
 */
async function backlogOf(host: ConsoleHost, signal: string) {
  const now = host.clock.now();
  const [st, instances] = await Promise.all([
    host.store.stats(signal, now),
    host.store.listInstances(now - ALIVE_MS),
  ]);
  return {
    pending: st.pending,
    inflight: st.inflight,
    liveConsumer: instances.length === 0 ? null : instances.some((i) => i.signals.includes(signal)),
    declared: host.manifest.signals.some((s) => s.name === signal),
  };
}

/** A message as every view shows it; `lapsed` and `history` are derived here only (attempt-history.ts). */
const messageView = (host: ConsoleHost) => (m: StoredMessage) => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  status: m.status,
  attempts: m.attempts,
  /** Operator replays of this message so far. */
  replays: m.replays ?? 0,
  failures: m.failures,
  ...attemptHistory(m, host.config?.leaseMs),
  payload: m.payload,
  parentRunId: m.parentRunId,
  createdAt: m.createdAt,
  updatedAt: m.updatedAt,
  leaseExpiresAt: m.leaseExpiresAt,
});

/** The first minute bucket of the THROUGHPUT_MINUTES the views show, ending with `now`'s. */
const throughputFrom = (now: number): number =>
  Math.floor(now / 60_000) * 60_000 - (THROUGHPUT_MINUTES - 1) * 60_000;

/** Deliveries per minute of a queue with none in the window. */
const noDeliveries = (): number[] => new Array<number>(THROUGHPUT_MINUTES).fill(0);

/** Per-minute deliveries of several queues added up (a broadcast signal's copies). */
function sumBuckets(rows: ReadonlyArray<readonly number[]>): number[] {
  const out = noDeliveries();
  for (const r of rows) r.forEach((n, i) => (out[i] = (out[i] ?? 0) + n));
  return out;
}

/**
 * Copies read per broadcast flow, newest delivered first (one indexed read), for the newest failed
 * ones, and to count the failed among them when the driver does not count them (stats'
 * `deliveredFailed`, optional). A broadcast copy is never retried nor dead-lettered: a failed one is
 * settled `delivered` with its failure (deadLetter: false), and `delivered` counts it.
 */
export const FAILED_COPIES_SCAN = 100;

/**
 * A copies queue's failed copies: the exact count from the driver's stats, with the newest failed
 * ones among the newest FAILED_COPIES_SCAN delivered (no read when none failed). A driver without
 * `deliveredFailed`: the failed among those read, and `failedOf`, how many were read.
 */
async function failedCopies(
  host: ConsoleHost,
  queue: string,
  st: SignalStats,
): Promise<{ failed: number; failedOf?: number; recentFailed: StoredMessage[] }> {
  if (st.deliveredFailed === 0) return { failed: 0, recentFailed: [] };
  const page = await host.store.pageMessages({
    signal: queue,
    status: "delivered",
    limit: FAILED_COPIES_SCAN,
  });
  const failed = page.items.filter((m) => m.failures.length > 0);
  const recentFailed = failed.slice(0, RECENT_FAILURES);
  if (st.deliveredFailed !== undefined) return { failed: st.deliveredFailed, recentFailed };
  return { failed: failed.length, failedOf: page.items.length, recentFailed };
}

/** One queue's counts as the Console shows them. */
const countsOf = (st: SignalStats) => ({
  pending: st.pending,
  inflight: st.inflight,
  dead: st.dead,
  delivered: st.delivered,
  oldestPendingAgeMs: st.oldestPendingAgeMs,
});

async function signalsView(host: ConsoleHost) {
  const now = host.clock.now();
  const from = throughputFrom(now);
  const hasBroadcast = host.manifest.signals.some((s) => s.delivery === "broadcast");
  const [stats, tp, fleet] = await Promise.all([
    host.operator.signals(),
    host.store.throughput(from, 60_000, now),
    hasBroadcast ? host.store.liveSubscriptions(now) : Promise.resolve([]),
  ]);
  const byName = new Map(tp.map((t) => [t.signal, t.delivered]));
  const clockQueues = new Map(
    host.manifest.signals
      .filter((s) => s.name.startsWith(CLOCK_PREFIX))
      .map((s) => [s.name, s.name.slice(CLOCK_PREFIX.length)]),
  );
  return Promise.all(
    host.manifest.signals.map(async (s) => {
      const base = {
        name: s.name,
        delivery: s.delivery,
        description: s.description,
        flows: s.flows,
        retries: s.retries,
        ...(clockQueues.has(s.name) ? { schedule: clockQueues.get(s.name) } : {}),
      };
      if (s.delivery === "broadcast") {
        // A broadcast signal has no queue of its own: each subscribed flow (here or elsewhere in the
        // fleet) gets its own queue of copies, `~broadcast:<signal>:<flow>`. They are shown here, under
        // the signal they copy, never as signals of their own.
        const flows = [
          ...new Set([...s.flows, ...fleet.filter((f) => f.signal === s.name).map((f) => f.flow)]),
        ];
        const copies = await Promise.all(
          flows.sort().map(async (flow) => {
            const queue = broadcastQueue(s.name, flow);
            const st = await host.store.stats(queue, now);
            const failed = await failedCopies(host, queue, st);
            return {
              flow,
              queue,
              ...countsOf(st),
              ...failed,
              delivered10m: byName.get(queue) ?? noDeliveries(),
            };
          }),
        );
        return {
          ...base,
          copies: copies.map(({ delivered10m: _d, recentFailed: _f, ...c }) => c),
          /** The newest failed copies of each flow (the overview's recent failures). */
          failedCopies: copies.flatMap((c) => c.recentFailed),
          throughput: {
            from,
            bucketMs: 60_000,
            delivered: sumBuckets(copies.map((c) => c.delivered10m)),
          },
        };
      }
      const st = stats.find((x) => x.signal === s.name);
      return {
        ...base,
        ...(st ? countsOf(st) : {}),
        throughput: {
          from,
          bucketMs: 60_000,
          delivered: byName.get(s.name) ?? noDeliveries(),
        },
      };
    }),
  );
}

/**
 * A queue this app does not declare but whose messages are still stored (storedSignal): the counts and
 * throughput a declared once signal shows, with what only a declaration knows left empty.
 */
async function undeclaredView(host: ConsoleHost, name: string) {
  const now = host.clock.now();
  const from = throughputFrom(now);
  const [st, tp] = await Promise.all([host.store.stats(name, now), host.store.throughput(from, 60_000, now)]);
  return {
    name,
    delivery: "once" as const,
    declared: false,
    description: null,
    flows: [],
    retries: null,
    ...countsOf(st),
    throughput: {
      from,
      bucketMs: 60_000,
      delivered: tp.find((t) => t.signal === name)?.delivered ?? noDeliveries(),
    },
  };
}

/** A signal row as the API answers it: the failed copies it carries for the overview left out. */
const rowOf = <T extends object>(row: T): Omit<T, "failedCopies"> => {
  const { failedCopies: _f, ...rest } = row as T & { failedCopies?: unknown };
  return rest;
};

/**
 * One broadcast flow's queue of copies (`~broadcast:<signal>:<flow>`), read as a queue: its counts,
 * the failed copies among the newest delivered, its throughput, and the signal and flow it belongs to.
 */
async function copiesView(host: ConsoleHost, queue: string, of: { signal: string; flow: string }) {
  const now = host.clock.now();
  const from = throughputFrom(now);
  const [st, tp] = await Promise.all([
    host.store.stats(queue, now),
    host.store.throughput(from, 60_000, now),
  ]);
  const failed = await failedCopies(host, queue, st);
  return {
    name: queue,
    delivery: "copies" as const,
    declared: true,
    copiesOf: of,
    description: `${of.signal} → ${of.flow}`,
    flows: [of.flow],
    retries: 0,
    ...countsOf(st),
    failed: failed.failed,
    ...(failed.failedOf === undefined ? {} : { failedOf: failed.failedOf }),
    throughput: {
      from,
      bucketMs: 60_000,
      delivered: tp.find((t) => t.signal === queue)?.delivered ?? noDeliveries(),
    },
  };
}

// Per Console: runCounts is a count over the whole runs table (250–650 ms at 1 000 000 runs on
// PostgreSQL), and every open overview re-reads it every 2 s (shared-read.ts).
const runCountsOf = new WeakMap<ConsoleHost, ConsoleHost["store"]["runCounts"]>();
const runCounts = (host: ConsoleHost): ReturnType<ConsoleHost["store"]["runCounts"]> => {
  let read = runCountsOf.get(host);
  if (read === undefined) {
    read = sharedRead(() => host.store.runCounts());
    runCountsOf.set(host, read);
  }
  return read();
};

/** What to do about a stranded run: the run detail's `strandedFix`, printed by `oke run`. */
const strandedRunFix = (runId: string): string =>
  "It resumes where it stopped once an instance that has the flow runs (deploy it again). " +
  `If the flow was removed on purpose, end the run with oke terminate ${runId} (its undos do not run).`;

export const handlers: Record<string, ApiHandler> = {
  "GET /api/overview": async ({ host }) => {
    const [signals, counts, failedRuns, heldRuns, instances, audit, schedules] = await Promise.all([
      signalsView(host),
      runCounts(host),
      host.store.pageRuns({ status: "failed", limit: RECENT_FAILURES }),
      host.store.pageRuns({ held: true, limit: HELD_SHOWN + 1 }),
      host.store.listInstances(host.clock.now() - ALIVE_MS),
      host.store.pageAudit({ limit: 10 }),
      host.store.listSchedules(),
    ]);
    const stranded = await strandedView(host, counts, instances, schedules, host.clock.now());
    const held = await heldCounts(host, heldRuns.items);
    // The newest dead letters of all signals: each signal's newest few (an index walked backwards),
    // merged newest first — the same order as the failed runs beside them (newest created first).
    const deadLetters: Array<ReturnType<ReturnType<typeof messageView>>> = [];
    for (const s of signals)
      if ("dead" in s && (s.dead ?? 0) > 0)
        deadLetters.push(
          ...(
            await host.store.pageMessages({
              signal: s.name,
              status: "dead",
              limit: RECENT_FAILURES,
              newestFirst: true,
            })
          ).items.map(messageView(host)),
        );
    deadLetters.sort((a, b) => b.createdAt - a.createdAt);
    // Broadcast copies whose handler failed: settled delivered (never retried), so no dead letter says so.
    const failedCopyViews = signals
      .flatMap((s) => ("failedCopies" in s ? s.failedCopies : []))
      .map(messageView(host))
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .slice(0, RECENT_FAILURES)
      .map((m) => ({ ...m, copyOf: copiesOf(host, m.signal) ?? null }));
    return {
      body: {
        env: host.env,
        now: host.clock.now(),
        signals: signals.map(rowOf),
        flows: host.manifest.flows.map((f) => ({
          name: f.name,
          durable: f.durable,
          triggers: f.triggers,
          runs: Object.fromEntries(counts.filter((c) => c.flow === f.name).map((c) => [c.status, c.count])),
          // Its held-back runs, by status: counted in `runs` too, yet no one works them.
          held: held.byFlow.get(f.name) ?? {},
        })),
        recentFailures: {
          deadLetters: deadLetters.slice(0, RECENT_FAILURES),
          copies: failedCopyViews,
          runs: failedRuns.items.map((r) => ({ ...summary(r), error: r.error })),
        },
        instances: instances.length,
        // How many of them run each role (instance.role): a web instance does no background work.
        instanceRoles: {
          all: instances.filter((i) => roleOf(i) === "all").length,
          web: instances.filter((i) => roleOf(i) === "web").length,
          worker: instances.filter((i) => roleOf(i) === "worker").length,
        },
        stranded,
        // Runs given back with a reason (RunRecord.held): running in the counts, but waiting for a deploy.
        heldBack: {
          runs: heldRuns.items.slice(0, HELD_SHOWN).map(summary),
          more: heldRuns.items.length > HELD_SHOWN,
          fix: heldBackFix(heldRuns.items.slice(0, HELD_SHOWN)),
          // False past heldLimits.counted held-back runs: the flows' `held` counts are of the newest ones.
          allCounted: held.all,
        },
        audit: audit.items,
      },
    };
  },

  "GET /api/signals": async ({ host }) => ({ body: { signals: (await signalsView(host)).map(rowOf) } }),

  "GET /api/signals/:signal": async ({ host }, { params }) => {
    const name = params.signal;
    const s = (await signalsView(host)).find((x) => x.name === name);
    if (s) return { body: { ...rowOf(s), declared: true } };
    const copies = name === undefined ? undefined : copiesOf(host, name);
    if (copies !== undefined) return { body: await copiesView(host, name!, copies) };
    return { body: await undeclaredView(host, await storedSignal(host, name)) };
  },

  "GET /api/signals/:signal/messages": async ({ host }, { params, query }) => {
    const signal = await storedSignal(host, params.signal, "read");
    const status = (query.get("status") ?? "pending") as MessageStatus;
    if (!MESSAGE_STATUSES.includes(status))
      throw badRequest(`status must be one of ${MESSAGE_STATUSES.join(", ")}, got "${String(status)}"`);
    const page = await host.store.pageMessages({
      signal,
      status,
      cursor: cursorOf(query, decodeSeqCursor),
      limit: limitOf(query),
    });
    return { body: { items: page.items.map(messageView(host)), next: page.next } };
  },

  "GET /api/signals/:signal/dead": async ({ host }, { params, query }) => {
    const signal = await storedSignal(host, params.signal);
    const page = await host.store.pageMessages({
      signal,
      status: "dead",
      cursor: cursorOf(query, decodeSeqCursor),
      limit: limitOf(query),
    });
    return { body: { items: page.items.map(messageView(host)), next: page.next } };
  },

  "GET /api/messages/:id": async ({ host }, { params }) => {
    const m = await host.store.getMessage(params.id ?? "");
    if (!m)
      throw notFound(`no message "${params.id ?? ""}" (never emitted, discarded, or pruned after delivery)`);
    // Whether "emitted by" names a run there is to show: a plain flow's invocation id is never stored
    // as a run, and a durable run is pruned after durable.retentionMs while its dead letters stay.
    // One primary-key read, for this one message only (never per row of a list).
    const parentRunFound = m.parentRunId ? (await host.store.getRun(m.parentRunId)) !== undefined : false;
    return { body: { ...messageView(host)(m), parentRunFound } };
  },

  "POST /api/signals/:signal/replay": async ({ host, jobs, audit }, { params, body, actor }) => {
    const signal = onceSignal(host, params.signal);
    const b = bodyObject(body);
    const target = targetOf(b);
    const dryRun = flagOf(b, "dryRun");
    const rate = b.rate;
    // At least one an hour: a rate of 1e-300 made a job that never sent a message and never ended.
    if (rate !== undefined && (typeof rate !== "number" || !(rate >= MIN_RATE) || rate > 10_000))
      throw badRequest(
        '"rate" must be a number of messages per second, at least 1/3600 (one an hour) and at most 10 000',
      );
    const picked = await pick(host, signal, target, dryRun || rate !== undefined);
    if (dryRun) {
      await audit({
        actor,
        action: "replay",
        target: `signal:${signal}`,
        detail: { dryRun, all: target === "all", count: picked.ids.length, rate },
      });
      return {
        body: {
          dryRun: true,
          wouldReplay: picked.ids,
          count: picked.ids.length,
          more: picked.more,
          skipped: picked.skipped,
          backlog: await backlogOf(host, signal),
        },
      };
    }
    if (rate !== undefined) {
      const job = jobs.start(signal, picked.ids, rate, actor);
      await audit({
        actor,
        action: "replay",
        target: `signal:${signal}`,
        detail: { all: target === "all", count: picked.ids.length, rate, job: job.id },
      });
      return {
        status: 202,
        body: { job, more: picked.more, skipped: picked.skipped, backlog: await backlogOf(host, signal) },
      };
    }
    // "all" acts on the ids picked above (at most replayLimits.all), never on the whole signal in one
    // statement: a signal with millions of dead letters would otherwise be one unbounded UPDATE.
    const replayed = picked.ids.length === 0 ? [] : await host.operator.replay(signal, picked.ids);
    await audit({
      actor,
      action: "replay",
      target: `signal:${signal}`,
      detail: { all: target === "all", count: replayed.length, ids: replayed.slice(0, 100) },
    });
    return {
      body: {
        replayed,
        count: replayed.length,
        more: picked.more,
        skipped: target === "all" ? [] : without(target, replayed),
        // As a discard's: replayed messages are pending again, and with no live consumer they wait.
        backlog: await backlogOf(host, signal),
      },
    };
  },

  "POST /api/signals/:signal/discard": (ctx, req) => discardIn(ctx, req, "dead"),

  // A route of its own, not a field of discard's body: an app older than it ignores an unknown field
  // and would delete dead letters instead; an unknown route it answers with a 404.
  "POST /api/signals/:signal/discard-pending": (ctx, req) => discardIn(ctx, req, "pending"),

  "GET /api/replays": async ({ jobs }) => ({ body: { jobs: jobs.list() } }),

  // A paced replay an operator wants ended: what was replayed stays replayed, nothing more is sent.
  "POST /api/replays/:id/stop": async ({ jobs, audit }, { params, actor }) => {
    const id = Number(params.id);
    const out = Number.isSafeInteger(id) ? jobs.stop(id) : undefined;
    if (out === undefined)
      throw notFound(`no replay job ${JSON.stringify(params.id ?? "")} (GET /api/replays lists them)`);
    const { job, stopped } = out;
    if (stopped)
      await audit({
        actor,
        action: "replay",
        target: `signal:${job.signal}`,
        detail: { job: job.id, stopped: true, replayed: job.replayed, total: job.total },
      });
    return { body: { job, stopped } };
  },

  "GET /api/runs": async ({ host }, { query }) => {
    // An empty filter field is no filter.
    const status = query.get("status") || undefined;
    // Own keys only: `in` also finds "__proto__", "constructor", "toString" on every object.
    if (status !== undefined && !Object.hasOwn(RUN_STATUSES, status))
      throw badRequest(`status must be one of ${Object.keys(RUN_STATUSES).join(", ")}, got "${status}"`);
    const held = query.get("held") || undefined;
    if (held !== undefined && held !== "true")
      throw badRequest(`held must be true (only runs held back) or left out, got "${held}"`);
    const label = query.get("label") || undefined;
    // The store filters by label, so every page holds matches and `next` continues among them.
    const page = await host.store.pageRuns({
      status: status as RunStatus | undefined,
      flow: query.get("flow") || undefined,
      parentRunId: query.get("parent") || undefined,
      since: timeOf(query, "since"),
      until: timeOf(query, "until"),
      sleepLabel: label,
      held: held === "true" ? true : undefined,
      cursor: cursorOf(query, decodeCursor),
      limit: limitOf(query),
    });
    // Sleep labels come from each sleeping run's journal: one read per sleeping run on the page.
    const items = [];
    for (const r of page.items) {
      let sleepingOn: string | null = null;
      if (label !== undefined) sleepingOn = label;
      else if (r.status === "sleeping") {
        const last = [...(await host.store.getJournal(r.id))].reverse().find((e) => e.kind === "sleep");
        sleepingOn = last ? entryName(last) : null;
      }
      items.push({ ...summary(r), parentRunId: r.parentRunId, sleepingOn, error: r.error });
    }
    // Filtered by a flow: whether the app has it, so an empty list can say why (a misspelt name, or
    // a flow that keeps no runs) rather than just "no runs".
    const flowName = query.get("flow") || undefined;
    if (flowName === undefined) return { body: { items, next: page.next } };
    const flow = host.manifest.flows.find((f) => f.name === flowName);
    const flowKind = flow === undefined ? "none" : flow.durable ? "durable" : "plain";
    const durableFlows = host.manifest.flows.filter((f) => f.durable).map((f) => f.name);
    return {
      body: { items, next: page.next, flowKind, ...(flowKind === "none" ? { durableFlows } : {}) },
    };
  },

  "GET /api/runs/:id": async ({ host }, { params, query }) => {
    const whole = query.get("timeline");
    if (whole !== null && whole !== "all")
      throw badRequest(`timeline must be "all" (every journal entry) or left out, got "${whole}"`);
    const detail = await runDetail(host, params.id ?? "", { wholeTimeline: whole === "all" });
    if (!detail) throw notFound(`no run "${params.id ?? ""}"`);
    const now = host.clock.now();
    // Stranded by the overview's rule (strandedRun): null when no instance is live, as nothing is judged then.
    const instances = await host.store.listInstances(now - ALIVE_MS);
    const stranded =
      instances.length === 0 ? null : strandedRun(detail.run, new Set(instances.flatMap((i) => i.flows)));
    return {
      body: {
        ...detail,
        // Whether POST …/terminate would end it now, by the store's rule (the app's clock, not the page's).
        terminable: terminable(host, detail.run),
        // The app's clock, so a reader can tell a wake time that has passed (`oke run`).
        now,
        stranded,
        ...(stranded === true ? { strandedFix: strandedRunFix(detail.run.id) } : {}),
      },
    };
  },

  "POST /api/runs/:id/wake": async ({ host, audit }, { params, actor }) => {
    const runId = params.id ?? "";
    const run = await host.store.getRun(runId);
    // The spec's answer for both a missing run and one that is not asleep: 404, `run "{id}" not found`.
    if (run?.status !== "sleeping")
      throw new ClockResourceNotFoundError(
        runId,
        "run",
        run === undefined
          ? undefined
          : run.held !== undefined
            ? // Running in the counts, yet no one works it: say why it waits, not "running".
              `"Not found" means no sleeping run "${runId}": it exists but is held back (${run.held.code}): ${run.status} with no holder, waiting until an instance can take it again, and only a sleeping run can be woken. oke run ${runId} says why and what to do; oke terminate ${runId} ends it (its undos do not run).`
            : `"Not found" means no sleeping run "${runId}": it exists but is ${run.status}, and only a sleeping run can be woken (oke run ${runId} shows where it is).`,
      );
    const result = await host.operator.wakeEarly(runId);
    await audit({
      actor,
      action: "wake",
      target: `run:${runId}`,
      detail: { outcome: result.outcome, flow: run.flow, wakeAt: run.wakeAt },
    });
    return { body: result };
  },

  "POST /api/runs/:id/terminate": async ({ host, audit }, { params, body, actor }) => {
    const runId = params.id ?? "";
    const reason = reasonOf(body);
    if (host.store.terminateRun === undefined) throw cannotTerminate(host.store.driver);
    const now = host.clock.now();
    const result = await host.store
      .terminateRun({ runId, now, error: terminatedError(actor, now, reason) })
      .catch(async (e: unknown) => {
        // A driver that lost its race with takes and releases of the run every time it tried (it is
        // being worked right now): a refusal like `held`, audited too, not an internal error.
        if (!(e instanceof JournalLeaseBusy)) throw e;
        await audit({ actor, action: "terminate", target: `run:${runId}`, detail: { outcome: "busy" } });
        throw runRefused(
          `run "${runId}" was taken and given back by instances while the terminate tried, three times over: nothing changed; try again`,
        );
      });
    if (result.outcome === "missing") throw notFound(`no run "${runId}"`);
    // Audited once the store answered, refusals too: the log shows who tried to end which run.
    await audit({
      actor,
      action: "terminate",
      target: `run:${runId}`,
      detail: { outcome: result.outcome, ...(reason === undefined ? {} : { reason }) },
    });
    if (result.outcome === "held")
      throw runRefused(
        `run "${runId}" is held by ${result.leaseOwner}, whose lease lapses at ${new Date(result.leaseExpiresAt).toISOString()}: a run someone holds is not terminated (nothing changed); try again once it sleeps, is held back, or that lease lapsed`,
      );
    // A durable consumer's run that had parked: its message was settled delivered then, and nothing
    // would settle it again. It becomes a dead letter, which an operator can replay.
    const settleMessage = async (run: RunRecord) => {
      const message = await settleTerminatedMessage(
        host.store,
        run,
        host.clock.now(),
        (signal) => host.manifest.signals.find((s) => s.name === signal)?.deadLetter,
        host.logger,
      );
      if (message !== undefined && (message.outcome === "dead" || message.outcome === "delivered"))
        await audit({
          actor,
          action: "terminate",
          target: `signal:${message.signal}`,
          detail: { messageId: message.id, run: runId, outcome: message.outcome },
        });
      return message;
    };
    if (result.outcome === "final") {
      // Terminated before, and the answer lost with its message left delivered (an outage between the
      // two writes): this retry settles the message, so the operator's retry completes the terminate.
      const run = result.status === "failed" ? await host.store.getRun(runId) : undefined;
      const message = run?.error?.code === TERMINATED ? await settleMessage(run) : undefined;
      const settled = message?.outcome === "dead" || message?.outcome === "delivered";
      throw runRefused(
        `run "${runId}" is already ${result.status}: there is nothing to terminate` +
          (settled
            ? `; its message ${message.id} (${message.signal}) was still delivered and is now ${message.outcome === "dead" ? "a dead letter" : "delivered with the run's failure"}`
            : ""),
      );
    }
    const message = await settleMessage(result.run);
    return {
      body: {
        outcome: result.outcome,
        run: { ...summary(result.run), error: result.run.error },
        ...(message === undefined ? {} : { message }),
      },
    };
  },

  "GET /api/instances": async ({ host }) => {
    const now = host.clock.now();
    return {
      body: {
        now,
        instances: (await host.store.listInstances(now - ALIVE_MS)).map((i) => ({ ...i, role: roleOf(i) })),
        self: host.instanceId,
      },
    };
  },

  "GET /api/schedules": async ({ host }) => {
    const now = host.clock.now();
    const [list, records, instances] = await Promise.all([
      host.operator.schedules.list(),
      host.store.listSchedules(),
      host.store.listInstances(now - ALIVE_MS),
    ]);
    // The overview's rule (strandedClocks): active, a slot due, and no live instance declares it. With
    // no live instance at all nothing can be told apart, and nothing is marked.
    const stranded =
      instances.length === 0
        ? new Set<string>()
        : new Set(
            strandedClocks(records, new Set(instances.flatMap((i) => i.signals)), now).map((c) => c.name),
          );
    return {
      body: {
        schedules: list.map((s) => ({
          ...s,
          stranded: stranded.has(s.name),
          ...(stranded.has(s.name) ? { strandedFix: STRANDED_CLOCK_FIX } : {}),
        })),
      },
    };
  },

  "POST /api/schedules/:name/:action": async ({ host, audit }, { params, body, actor }) => {
    const name = params.name ?? "";
    const action = params.action ?? "";
    let result: unknown;
    if (action === "pause") result = await host.operator.schedules.pause(name);
    else if (action === "resume") result = await host.operator.schedules.resume(name);
    else if (action === "reset") result = await host.operator.schedules.reset(name);
    else if (action === "trigger") result = await host.operator.schedules.trigger(name);
    else if (action === "edit") {
      const b = bodyObject(body);
      // No prototype: a "__proto__" key is then a field like any (refused below), not a prototype.
      const edit: { cron?: string; every?: string; timezone?: string } = Object.create(null) as {
        cron?: string;
        every?: string;
        timezone?: string;
      };
      // Every field goes to the edit, which refuses one it does not know (OKE1701 unknown field): a
      // mistyped "timeZone" dropped here applied the cron in the zone stored before, answering 200.
      for (const [k, v] of Object.entries(b)) {
        if (v === undefined) continue;
        if ((k === "cron" || k === "every" || k === "timezone") && typeof v !== "string")
          throw badRequest(`"${k}" must be a string`);
        (edit as Record<string, unknown>)[k] = v;
      }
      result = await host.operator.schedules.edit(name, edit);
      await audit({ actor, action, target: `schedule:${name}`, detail: { ...edit } });
      return { body: result };
    } else throw notFound(`no schedule action "${action}" (pause, resume, edit, reset, trigger)`);
    await audit({ actor, action, target: `schedule:${name}`, detail: {} });
    return { body: result };
  },

  "GET /api/audit": async ({ host }, { query }) => {
    // Audit cursors are entry ids.
    const cursor = cursorOf(query, decodeAuditCursor);
    return { body: await host.store.pageAudit({ cursor, limit: limitOf(query) }) };
  },
};
