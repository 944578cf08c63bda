/** Runs one attempt of a flow body with its fx, and checks its input and output contracts. */
import { PARKED, type JournalSession } from "../durable/session.ts";
import type { UndoList } from "../durable/runner.ts";
import { OkeError } from "../errors.ts";
import type { AnyFlow } from "../flow/flow.ts";
import { createFx } from "./fx.ts";
import { ResourceScope } from "./resources.ts";
import { describeIssues, validate } from "../schema.ts";
import type { FxRuntime } from "./runtime.ts";

/** Checks a flow's `in`; 422 with the issues listed when it does not match. */
export async function checkInput(flow: AnyFlow, schema: AnyFlow["in"], input: unknown): Promise<unknown> {
  if (!schema) return input;
  const r = await validate(schema, input);
  if (r.ok) return r.value;
  throw new OkeError({
    code: "OKE1422",
    message: `Flow "${flow.name ?? "(unnamed)"}": input does not match its schema: ${describeIssues(r.issues)}`,
    status: 422,
    details: r.issues,
  });
}

/** Checks a flow's `out` so a flow never answers something its contract forbids. */
async function checkOutput(flow: AnyFlow, value: unknown): Promise<unknown> {
  if (!flow.out) return value;
  const r = await validate(flow.out, value);
  if (r.ok) return r.value;
  throw new OkeError({
    code: "OKE1423",
    message: `Flow "${flow.name ?? "(unnamed)"}": output does not match its schema: ${describeIssues(r.issues)}`,
    status: 500,
    details: r.issues,
  });
}

export interface ExecuteFrame {
  runId: string;
  attempt: number;
  parentRunId: string | null;
  session?: JournalSession;
  undos?: UndoList;
  /** Plain runs: emits and calls take ids derived from `runId` (see Frame.derivedIds). */
  derivedIds?: boolean;
}

/**
 * One attempt of a flow body with its fx; resources registered with fx.using
 * are released when it ends — at a park too, since the attempt ends there.
 * Resolves with PARKED when a durable run parked.
 */
export async function executeFlow(
  rt: FxRuntime,
  flow: AnyFlow,
  input: unknown,
  frame: ExecuteFrame,
): Promise<unknown> {
  const scope = new ResourceScope();
  const fx = createFx(rt, { flow, scope, ...frame });
  try {
    const body = Promise.resolve().then(() => flow.do(input, fx));
    const value = frame.session
      ? await Promise.race([body, frame.session.parked.then(() => PARKED)])
      : await body;
    if (value === PARKED) return PARKED;
    // Without an `out` schema or a resource there is nothing to await: each skipped await is an
    // async call and a microtask per message on a queue worker's path.
    return flow.out ? await checkOutput(flow, value) : value;
  } finally {
    if (!scope.empty) {
      const disposeErrors = await scope.dispose();
      for (const err of disposeErrors)
        rt.logger.warn({ err, flow: flow.name, runId: frame.runId }, "fx.using: dispose failed");
    }
  }
}
