/** The Store contract's shared errors, raised the same way by every driver. */
/**
 * The Store contract and the errors every driver raises the same way. Drivers
 * import their errors from here so the conformance suite can check one code and
 * one text per failure. (Candidates to move into src/errors.ts `errors`.)
 */
import { OkeError } from "../errors.ts";
import type { RunStatus } from "./types.ts";

export type * from "./types.ts";
export type * from "./console-types.ts";
export type * from "./health-types.ts";
export type * from "./schedule-types.ts";
export type * from "./fanout-types.ts";

export const storeErrors = {
  /** Only postgres can join a caller's transaction. */
  txUnsupported: (driver: string) =>
    new OkeError({
      code: "OKE1260",
      message: `store: transactional emit needs the postgres driver (this store is "${driver}")`,
      fix: "Use the postgres driver for enqueue({ tx }), or emit with fx.emit inside a durable flow so the journal commits the message.",
    }),
  duplicateMessage: (id: string) =>
    new OkeError({
      code: "OKE1261",
      message: `store: message "${id}" already exists`,
      fix: "Message ids must be unique; let the runtime generate them.",
    }),
  keyedClaimAtEmit: (id: string) =>
    new OkeError({
      code: "OKE1262",
      message: `store: message "${id}" has a key and cannot be claimed at emit`,
      fix: "Keyed messages go through enqueue; their key's order decides who claims them.",
    }),
  /** Terminal runs refuse resume. */
  runTerminal: (runId: string, status: RunStatus) =>
    new OkeError({
      code: "OKE1310",
      message: `journal: run "${runId}" is ${status}`,
      fix: "A completed or failed run cannot resume; start a new run with a new id.",
      status: 409,
    }),
  runNotFound: (runId: string) =>
    new OkeError({ code: "OKE1311", message: `journal: run "${runId}" not found`, status: 404 }),
  duplicateSeq: (runId: string, seq: number) =>
    new OkeError({
      code: "OKE1312",
      message: `journal: run "${runId}" already has an entry at seq ${seq}`,
      fix: "Journal entries are append-only; the run's replay position and its journal disagree.",
      status: 409,
    }),
  /** A holder's append that matches a stored entry's position, kind and name but not its content. */
  entryDiffers: (runId: string, seq: number, kind: string, name: string) =>
    new OkeError({
      code: "OKE1313",
      message: `journal: run "${runId}" already has ${kind} "${name}" at seq ${seq} with a different value`,
      fix: "An append sent again after a lost reply must carry the same entry; a different value at a journaled position means two attempts of the run disagree (a step that is not deterministic given its journal, or two writers under one lease).",
      status: 409,
    }),
} as const;
