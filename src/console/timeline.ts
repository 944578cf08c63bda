/** A run's detail for operators: its journal as a timeline, emits linked to messages, calls to child runs, the trace chain. */
import { entryName, type JournalEntry, type RunRecord } from "../store/types.ts";
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
  /** Emits: the message it committed, and that message's status now (undefined once pruned). */
  messageId?: string;
  messageStatus?: string;
  /** Calls: the child run it started, when the callee is durable. */
  childRunId?: string;
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
}

export interface RunDetail {
  run: RunRecord;
  timeline: TimelineItem[];
  /** The sleep label while sleeping. */
  sleepingOn: string | null;
  /** Parent first, up to the root (at most 20). */
  ancestors: RunSummary[];
  children: RunSummary[];
}

const PREVIEW_CHARS = 160;
const MAX_LINKED_MESSAGES = 200;

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
});

export async function runDetail(host: ConsoleHost, runId: string): Promise<RunDetail | undefined> {
  const found = await host.operator.run(runId);
  if (!found) return undefined;
  const { run, journal } = found;
  const childPage = await host.store.pageRuns({ parentRunId: run.id, limit: 200 });
  const children = [...childPage.items].reverse(); // oldest first: the order calls were made
  const byFlow = new Map<string, RunRecord[]>();
  for (const c of children) byFlow.set(c.flow, [...(byFlow.get(c.flow) ?? []), c]);
  const entries = [...journal].sort((a, b) => a.seq - b.seq);
  let prev = run.createdAt;
  let linked = 0;
  const timeline: TimelineItem[] = [];
  for (const e of entries) {
    const item: TimelineItem = {
      seq: e.seq,
      kind: e.kind,
      name: entryName(e),
      at: e.at,
      tookMs: Math.max(0, e.at - prev),
    };
    prev = e.at;
    if (e.error) item.error = { code: e.error.code, message: e.error.message };
    if (e.kind === "sleep") {
      item.label = e.label;
      item.wakeAt = e.wakeAt;
      item.duration = e.duration;
    } else if (e.kind === "emit") {
      const id = (e.value as { messageId?: unknown } | undefined)?.messageId;
      if (typeof id === "string") {
        item.messageId = id;
        if (linked++ < MAX_LINKED_MESSAGES) item.messageStatus = (await host.store.getMessage(id))?.status;
      }
    } else {
      const p = preview(e.value);
      if (p !== undefined) item.preview = p;
      if (e.kind === "call") {
        const child = byFlow.get(e.name)?.shift();
        if (child) item.childRunId = child.id;
      }
    }
    timeline.push(item);
  }
  const ancestors: RunSummary[] = [];
  const seen = new Set([run.id]);
  for (let id = run.parentRunId; id !== null && ancestors.length < 20 && !seen.has(id);) {
    seen.add(id);
    const parent = await host.store.getRun(id);
    if (!parent) break;
    ancestors.push(summary(parent));
    id = parent.parentRunId;
  }
  const lastSleep = [...entries].reverse().find((e) => e.kind === "sleep");
  return {
    run,
    timeline,
    sleepingOn: run.status === "sleeping" && lastSleep ? entryName(lastSleep) : null,
    ancestors,
    children: children.map(summary),
  };
}
