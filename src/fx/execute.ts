/** Runs one attempt of a flow body with its fx, and checks its input and output contracts. */
import { PARKED, type JournalSession } from "../durable/session.ts";
import type { UndoList } from "../durable/runner.ts";
import { FlowInputError, OkeError } from "../errors.ts";
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
  throw new FlowInputError({
    flow: flow.name,
    message: `Flow "${flow.name ?? "(unnamed)"}": input does not match its schema: ${describeIssues(r.issues)}`,
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
export function executeFlow(
  rt: FxRuntime,
  flow: AnyFlow,
  input: unknown,
  frame: ExecuteFrame,
): Promise<unknown> {
  const scope = new ResourceScope();
  // Fields listed, not `{ flow, scope, ...frame }`: a spread after other properties takes V8's slow
  // object-clone path, ~200 B per message.
  const fx = createFx(rt, {
    flow,
    scope,
    runId: frame.runId,
    attempt: frame.attempt,
    parentRunId: frame.parentRunId,
    session: frame.session,
    undos: frame.undos,
    derivedIds: frame.derivedIds,
  });
  // The body starts on a later tick, never inside its caller's turn; a synchronous throw rejects.
  const body = Promise.resolve().then(() => flow.do(input, fx));
  if (frame.session !== undefined || flow.out) return finishAttempt(rt, flow, frame, scope, body);
  // No journal session and no `out` schema (a queue worker's plain consumer): one more promise and
  // no async frame — an async function and its await were ~900 B of garbage per message
  // (bench/s3-rounds.ts --alloc-profile). Resources, when the body registered any, are disposed first.
  return body.then(
    (value) => (scope.empty ? value : disposed(rt, flow, frame, scope).then(() => value)),
    (err: unknown) => {
      if (scope.empty) throw err;
      return disposed(rt, flow, frame, scope).then(() => {
        throw err;
      });
    },
  );
}

/** The general case: a durable run's park, an `out` schema to check, then the resources. */
async function finishAttempt(
  rt: FxRuntime,
  flow: AnyFlow,
  frame: ExecuteFrame,
  scope: ResourceScope,
  body: Promise<unknown>,
): Promise<unknown> {
  try {
    const value = frame.session
      ? await Promise.race([body, frame.session.parked.then(() => PARKED)])
      : await body;
    if (value === PARKED) return PARKED;
    return flow.out ? await checkOutput(flow, value) : value;
  } finally {
    if (!scope.empty) await disposed(rt, flow, frame, scope);
  }
}

/** Releases what fx.using registered, in reverse order; a failed dispose is logged, never thrown. */
async function disposed(
  rt: FxRuntime,
  flow: AnyFlow,
  frame: ExecuteFrame,
  scope: ResourceScope,
): Promise<void> {
  const disposeErrors = await scope.dispose();
  for (const err of disposeErrors)
    rt.logger.warn({ err, flow: flow.name, runId: frame.runId }, "fx.using: dispose failed");
}
