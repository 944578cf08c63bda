/** A run's detail for operators: its journal as a timeline, emits linked to messages, calls to child runs, the trace chain. */
import { holdFix } from "../durable/mismatch-log.ts";
import { RECOVERIES_EXCEEDED } from "../durable/recoveries.ts";
import { endsOf } from "../store/journal-rules.ts";
import {
  entryName,
  type JournalEnds,
  type JournalEntry,
  type RunHold,
  type RunRecord,
} from "../store/types.ts";
import type { ConsoleHost } from "./host.ts";

export interface TimelineItem {
  seq: number;
  kind: JournalEntry["kind"];
  name: string;
  /** When the entry was recorded (epoch ms). */
  at: number;
  /** Time since the previous entry (or the run's start): how long a step took, roughly. */
  tookMs: number;
  /** The journaled value as short JSON (never the whole of a large value). */
  preview?: string;
  error?: { code: string; message: string };
  /** Sleeps. */
  label?: string;
  wakeAt?: number;
  duration?: string;
  /** Emits: the emitted signal's delivery, when this app declares the signal. */
  delivery?: "once" | "broadcast" | "live";
  /**
   * Emits to a once signal (or one this app no longer declares): the message it committed, and that
   * message's status now — absent once the message is gone (pruned after delivery, or discarded).
   */
  messageId?: string;
  messageStatus?: string;
  /**
   * Emits to a broadcast or live signal: the event's id. There is no message of that id to link to:
   * a broadcast's copies are `<eventId>/<flow>` on each subscriber's queue, a live entry is on its tape.
   */
  eventId?: string;
  /** Calls: the child run it started, when the callee is durable. */
  childRunId?: string;
  /**
   * A step's closing entry (a step whose body made effects is journaled twice: its value at its own
   * position, then this entry after its body's effects): the positions its body took. No preview:
   * the step's value is on its first entry.
   */
  closes?: number[];
}

export interface RunSummary {
  id: string;
  flow: string;
  status: RunRecord["status"];
  createdAt: number;
  updatedAt: number;
  wakeAt: number | null;
  /** Takeovers after a lapsed lease (RunRecord.recoveries). */
  recoveries: number;
  /** Why it waits with no holder, while it does (RunRecord.held): absent otherwise. */
  held?: RunHold;
}

/**
 * A run's timeline longer than this is sent as its first TIMELINE_HEAD and last TIMELINE_TAIL entries
 * unless all are asked for (`?timeline=all`): a 20 000-step run sent every entry, each emit's message
 * looked up, on every 2 s refresh of its page.
 */
export const TIMELINE_MAX = 200;
export const TIMELINE_HEAD = 50;
export const TIMELINE_TAIL = 100;

export interface RunDetail {
  run: RunRecord;
  /** The journal as a timeline: every entry, or the head and tail of a long one (`timelineOmitted`). */
  timeline: TimelineItem[];
  /**
   * Entries left out between the head and the tail (a timeline over TIMELINE_MAX entries, all not
   * asked for): how many, and the seqs either side. Absent when the timeline is whole.
   */
  timelineOmitted?: { count: number; afterSeq: number; beforeSeq: number };
  /** The sleep label while sleeping. */
  sleepingOn: string | null;
  /** Parent first, up to the root (at most 20). */
  ancestors: RunSummary[];
  /**
   * Whether `run.parentRunId` names a stored run, as a message's `parentRunFound` says of its emitter:
   * a plain flow's invocation (an HTTP request's, a non-durable consumer's) is never stored as a run,
   * and a durable run is pruned after its retention. False when the run has no parent.
   */
  parentRunFound: boolean;
  /**
   * The parent id the chain stops at because no run of that id is stored (a flow invocation, or a
   * pruned run): `run.parentRunId` when parentRunFound is false, else the last ancestor's parent.
   * Null when the chain ends at a run with no parent (or at its 20th ancestor).
   */
  unstoredParentId: string | null;
  /** Runs whose parent is this one, oldest first: all of them, or the newest MAX_CHILDREN. */
  children: RunSummary[];
  /** There are more children than `children` holds (all: `GET /api/runs?parent=<id>`). */
  moreChildren: boolean;
  /** What to do about `run.held` (holdFix): null when it is not held back, or its code has no advice. */
  heldFix: string | null;
  /** `durable.maxRecoveries` of the Console's app: null when its host does not say. */
  maxRecoveries: number | null;
  /** Its recoveries explained in one line (recoveriesNote): null when it has none. */
  recovered: string | null;
}

const PREVIEW_CHARS = 160;
/** Children listed in a run's detail; calls past them are linked by looking their run up. */
const MAX_CHILDREN = 1_000;
/** Store reads a detail keeps in flight at once (message statuses, child runs). */
const LOOKUPS_AT_ONCE = 8;

export function preview(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let text: string;
  try {
    text = JSON.stringify(value) ?? "(not JSON)";
  } catch {
    text = "(not JSON)";
  }
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

export const summary = (r: RunRecord): RunSummary => ({
  id: r.id,
  flow: r.flow,
  status: r.status,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
  wakeAt: r.wakeAt,
  recoveries: r.recoveries,
  ...(r.held === undefined ? {} : { held: r.held }),
});

/**
 * What a run's recoveries mean, in one line for the run page and `oke run` (null when it has none):
 * each is a takeover after its holder stopped renewing its lease, so the journal entry after it counts
 * that wait in its time since the one before. The log line to look for is TakeoverLog's.
 */
export function recoveriesNote(
  run: Pick<RunRecord, "id" | "flow" | "recoveries">,
  maxRecoveries: number | null,
): string | null {
  const n = run.recoveries;
  if (!(n > 0)) return null;
  const bound =
    maxRecoveries === null
      ? ""
      : n > maxRecoveries
        ? ` (more than durable.maxRecoveries, ${maxRecoveries}: a run past it ends with ${RECOVERIES_EXCEEDED})`
        : ` (of at most ${maxRecoveries}: durable.maxRecoveries)`;
  return (
    `recovered ${n} time${n === 1 ? "" : "s"}${bound}: its holder stopped renewing the lease (process killed, ` +
    `crashed or stalled) and another instance took the run over once it lapsed; the entry after a takeover ` +
    `includes that wait. The log line "durable run "${run.id}" (${run.flow}) taken over from <holder>" names the holder`
  );
}

/** Runs `fn` on every item, at most `n` at once. */
async function eachLimit<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
}

/** The newest MAX_CHILDREN children of a run (store order: newest first), and whether there are more. */
async function childrenOf(host: ConsoleHost, runId: string): Promise<{ runs: RunRecord[]; more: boolean }> {
  const runs: RunRecord[] = [];
  let cursor: string | null = null;
  while (runs.length < MAX_CHILDREN) {
    const page = await host.store.pageRuns({
      parentRunId: runId,
      cursor,
      limit: Math.min(500, MAX_CHILDREN - runs.length),
    });
    runs.push(...page.items);
    if (page.next === null) return { runs, more: false };
    cursor = page.next;
  }
  return { runs, more: true };
}

/**
 * The entries a run's timeline shows: all of them, or over TIMELINE_MAX the first TIMELINE_HEAD and
 * last TIMELINE_TAIL, cut before any item is built so the left-out ones cost no lookup either. A
 * store with getJournalEnds reads only those ends (and the entry just before the tail, whose time
 * the tail's first item is measured from): a 20 000-step run's page read every entry on each
 * 2 s refresh.
 */
async function timelineEntries(
  host: ConsoleHost,
  runId: string,
  whole: boolean,
): Promise<{
  entries: JournalEntry[];
  omitted?: { count: number; afterSeq: number; beforeSeq: number };
  /** The last entry left out (the tail's first item took its time since it). */
  beforeCut?: JournalEntry;
}> {
  const read =
    whole || host.store.getJournalEnds === undefined
      ? undefined
      : await host.store.getJournalEnds(runId, TIMELINE_HEAD, TIMELINE_TAIL + 1);
  if (read !== undefined && read.count > TIMELINE_MAX) return cutAt(read);
  // Short enough that its ends were all of it.
  if (read !== undefined && read.tail.length === 0) return { entries: read.head };
  // Asked for whole, a store without ends, or longer than the ends but not long enough to cut.
  const all = [...(await host.store.getJournal(runId))].sort((a, b) => a.seq - b.seq);
  if (whole || all.length <= TIMELINE_MAX) return { entries: all };
  return cutAt(endsOf(all, TIMELINE_HEAD, TIMELINE_TAIL + 1));
}

/** A cut timeline from a journal's ends: the tail's first entry is the last one left out. */
function cutAt(ends: JournalEnds): {
  entries: JournalEntry[];
  omitted: { count: number; afterSeq: number; beforeSeq: number };
  beforeCut?: JournalEntry;
} {
  const [beforeCut, ...tail] = ends.tail;
  return {
    entries: [...ends.head, ...tail],
    omitted: {
      count: ends.count - TIMELINE_HEAD - TIMELINE_TAIL,
      afterSeq: ends.head[TIMELINE_HEAD - 1]!.seq,
      beforeSeq: tail[0]!.seq,
    },
    ...(beforeCut === undefined ? {} : { beforeCut }),
  };
}

/**
 * The positions a step's closing entry lists, or undefined for any other step entry. Step names are
 * unique in a run (OKE1302), so a step entry whose name came before is its closing one; when the
 * timeline is cut, the first may be among those left out, and the value's shape decides alone.
 */
function closingOf(e: JournalEntry, seen: ReadonlySet<string>, cut: boolean): number[] | undefined {
  const v = e.value as { nested?: unknown } | null | undefined;
  if (typeof v !== "object" || v === null || Object.keys(v).length !== 1) return undefined;
  const nested = v.nested;
  if (!Array.isArray(nested) || !nested.every((n) => Number.isSafeInteger(n))) return undefined;
  return seen.has(entryName(e)) || cut ? (nested as number[]) : undefined;
}

export async function runDetail(
  host: ConsoleHost,
  runId: string,
  options: { wholeTimeline?: boolean } = {},
): Promise<RunDetail | undefined> {
  const run = await host.store.getRun(runId);
  if (!run) return undefined;
  const { entries, omitted, beforeCut } = await timelineEntries(host, runId, options.wholeTimeline === true);
  const max = host.config?.durableMaxRecoveries;
  const maxRecoveries = max !== undefined && Number.isFinite(max) ? max : null;
  const { runs: newestFirst, more: moreChildren } = await childrenOf(host, run.id);
  const children = [...newestFirst].reverse(); // oldest first: the order calls were made
  const childIds = new Set(children.map((c) => c.id));
  const delivery = new Map(host.manifest.signals.map((s) => [s.name, s.delivery]));
  const timelineOmitted = omitted;
  const stepsSeen = new Set<string>();
  let prev = run.createdAt;
  const timeline: TimelineItem[] = [];
  const statusOf: Array<{ item: TimelineItem; id: string }> = [];
  const childOf: Array<{ item: TimelineItem; id: string }> = [];
  for (const [i, e] of entries.entries()) {
    // The first entry after the cut took its time since the last one left out, not since the head.
    if (beforeCut !== undefined && i === TIMELINE_HEAD) prev = beforeCut.at;
    const item: TimelineItem = {
      seq: e.seq,
      kind: e.kind,
      name: entryName(e),
      at: e.at,
      tookMs: Math.max(0, e.at - prev),
    };
    prev = e.at;
    if (e.error) item.error = { code: e.error.code, message: e.error.message };
    const closes = e.kind === "step" ? closingOf(e, stepsSeen, omitted !== undefined) : undefined;
    if (e.kind === "sleep") {
      item.label = e.label;
      item.wakeAt = e.wakeAt;
      item.duration = e.duration;
    } else if (e.kind === "emit") {
      const d = delivery.get(e.name);
      if (d !== undefined) item.delivery = d;
      const id = (e.value as { messageId?: unknown } | undefined)?.messageId;
      if (typeof id === "string") {
        if (d === "broadcast" || d === "live") item.eventId = id;
        else {
          item.messageId = id;
          statusOf.push({ item, id });
        }
      }
    } else if (closes !== undefined) {
      item.closes = closes;
    } else {
      if (e.kind === "step") stepsSeen.add(e.name);
      const p = preview(e.value);
      if (p !== undefined) item.preview = p;
      if (e.kind === "call") {
        // A durable parent names a durable callee's run `<its run id>.<the call's journal seq>`
        // (fx.call): no run of that id means the callee is not durable (or its run was pruned).
        const id = `${run.id}.${e.seq}`;
        if (childIds.has(id)) item.childRunId = id;
        else if (moreChildren) childOf.push({ item, id });
      }
    }
    timeline.push(item);
  }
  await eachLimit(statusOf, LOOKUPS_AT_ONCE, async ({ item, id }) => {
    const status = (await host.store.getMessage(id))?.status;
    if (status !== undefined) item.messageStatus = status;
  });
  await eachLimit(childOf, LOOKUPS_AT_ONCE, async ({ item, id }) => {
    if ((await host.store.getRun(id))?.parentRunId === run.id) item.childRunId = id;
  });
  const ancestors: RunSummary[] = [];
  let unstoredParentId: string | null = null;
  const seen = new Set([run.id]);
  for (let id = run.parentRunId; id !== null && ancestors.length < 20 && !seen.has(id);) {
    seen.add(id);
    const parent = await host.store.getRun(id);
    if (!parent) {
      unstoredParentId = id;
      break;
    }
    ancestors.push(summary(parent));
    id = parent.parentRunId;
  }
  // A sleeping run's park is its newest entry, so the tail (never cut) holds it.
  const lastSleep = [...entries].reverse().find((e) => e.kind === "sleep");
  return {
    run,
    timeline,
    ...(timelineOmitted === undefined ? {} : { timelineOmitted }),
    sleepingOn: run.status === "sleeping" && lastSleep ? entryName(lastSleep) : null,
    ancestors,
    parentRunFound: run.parentRunId !== null && unstoredParentId !== run.parentRunId,
    unstoredParentId,
    children: children.map(summary),
    moreChildren,
    heldFix: run.held === undefined ? null : holdFix(run.held.code),
    maxRecoveries,
    recovered: recoveriesNote(run, maxRecoveries),
  };
}
