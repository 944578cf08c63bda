/** prepareEmit: the checks and the message record of an emit, before anything touches the store. */
import { errors, OkeError } from "../errors.ts";
import { newId } from "../id.ts";
import { describeIssues, validate } from "../schema.ts";
import type { NewMessage } from "../store/types.ts";
import type { SignalHandle } from "./signal.ts";
import { checkKey, checkPayloadSize, checkStorable } from "./storable.ts";

export interface EmitContext {
  /** Signal name → number of bound flows. */
  subscriberCount: (signal: string) => number;
  now: number;
}

/** The context an app's registry gives every emit (fx.emit and app.emit alike). */
export const emitContext = (
  registry: { subscribers: ReadonlyMap<string, readonly unknown[]> },
  now: number,
): EmitContext => ({ subscriberCount: (s) => registry.subscribers.get(s)?.length ?? 0, now });

/**
 * Everything that happens before an emit touches the store: the key and the
 * payload limits every driver applies (OKE1252–OKE1256, see storable.ts), the
 * schema check (OKE1250), the subscriber check (OKE1240) and the message
 * record. Nothing is enqueued when this throws.
 */
export async function prepareEmit(
  ctx: EmitContext,
  target: SignalHandle,
  payload: unknown,
  options: { key?: string | undefined; id?: string | undefined } | undefined,
  producer: { flow: string; runId: string | null },
): Promise<NewMessage> {
  if (typeof target !== "object" || target === null || target.kind !== "signal") {
    // What was passed, short and quoted: most often the signal's name as a string ("welcome.sned").
    const t: unknown = target;
    const got =
      typeof t === "string"
        ? `the string ${JSON.stringify(t.length > 80 ? `${t.slice(0, 80)}…` : t)}; emit the handle the signal is declared as (import it from src/signals/), not its name`
        : t === null || t === undefined
          ? String(t)
          : typeof t === "object"
            ? `an object with keys ${JSON.stringify(Object.keys(t).slice(0, 5))}`
            : typeof t === "function"
              ? `the function ${t.name || "(anonymous)"}`
              : `${typeof t} ${(t as number | boolean | bigint | symbol).toString().slice(0, 80)}`;
    throw new TypeError(
      `fx.emit(signal, payload): the first argument must be a signal handle (flow "${producer.flow}"), got ${got}`,
    );
  }
  const key = options?.key;
  if (key !== undefined && (typeof key !== "string" || key === "")) {
    throw new OkeError({
      code: "OKE1251",
      message: `"${target.name}": key must be a non-empty string, got ${JSON.stringify(key)}`,
    });
  }
  const subject = `"${target.name}"`;
  if (key !== undefined) checkKey(key, subject);
  const id = options?.id;
  if (id !== undefined) {
    // A caller-chosen id (app.emit's idempotent emit) is stored and indexed like a key.
    if (typeof id !== "string" || id === "")
      throw new OkeError({
        code: "OKE1257",
        status: 422,
        message: `${subject}: id must be a non-empty string, got ${JSON.stringify(id)}`,
      });
    checkKey(id, `${subject} id`);
  }
  // Before the schema too: a validator recursing into a hostile depth would overflow the stack.
  checkStorable(payload, subject);
  let value = payload;
  if (target.schema) {
    const r = await validate(target.schema, payload);
    if (!r.ok) throw errors.invalidPayload(target.name, describeIssues(r.issues), r.issues);
    value = r.value;
    if (value !== payload) checkStorable(value, subject);
  }
  if (!target.optional && ctx.subscriberCount(target.name) === 0)
    throw errors.orphanEmit(producer.flow, target.name);
  // Payloads cross processes as JSON; refuse what JSON would silently mangle.
  let json: string | undefined;
  try {
    json = value === undefined ? undefined : JSON.stringify(value);
  } catch (e) {
    throw errors.invalidPayload(
      target.name,
      `payload is not JSON-serialisable: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (value !== undefined && json === undefined) {
    throw errors.invalidPayload(target.name, "payload is not JSON-serialisable");
  }
  if (json !== undefined) checkPayloadSize(json, subject);
  return {
    id: id ?? newId(ctx.now),
    signal: target.name,
    key: key ?? null,
    payload: json === undefined ? null : (JSON.parse(json) as unknown),
    parentRunId: producer.runId,
  };
}
