/** OkeError, the error codes and texts the docs fix word for word, and errorRecord. */
/**
 * One error class for everything okengine reports on purpose. `code` is stable
 * (documented in docs/errors.md); `cause` says what happened, `fix` what to do.
 */
export interface OkeErrorInit {
  code: string;
  /** What went wrong, in one sentence. */
  message: string;
  /** How to fix it, when there is a known fix. */
  fix?: string;
  /** HTTP status used when this error escapes an HTTP flow. */
  status?: number;
  /** Extra machine-readable detail (validation issues, names). */
  details?: unknown;
  /** The underlying error, if any. */
  cause?: unknown;
  /**
   * Whether HTTP clients outside dev see the message, fix and details. Default:
   * `status < 500`. A 5xx is the server's problem and its text may name paths,
   * schemas or hosts, so the client gets the code and "Internal error" only;
   * pass `true` for a 5xx written for clients (e.g. a 503 "retry later").
   */
  expose?: boolean;
  /**
   * A passing refusal: this request, sent again unchanged a little later, may
   * well succeed (the thing it needs is busy, not wrong). Default false. An
   * HTTP answer made of such an error frees the request's Idempotency-Key
   * instead of becoming its stored answer (docs/http.md). Not for an answer a
   * retry must get as it is — e.g. 409 OKE1442 "still running" tells a retry
   * about another request's key, which it must not free.
   */
  passing?: boolean;
}

export class OkeError extends Error {
  override readonly name: string = "OkeError";
  readonly code: string;
  readonly fix: string | undefined;
  readonly status: number;
  readonly details: unknown;
  readonly expose: boolean;
  /** See OkeErrorInit.passing. */
  readonly passing: boolean;

  constructor(init: OkeErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.fix = init.fix;
    this.status = init.status ?? 500;
    this.details = init.details;
    this.expose = init.expose ?? this.status < 500;
    this.passing = init.passing ?? false;
  }

  toJSON(): { code: string; message: string; fix?: string; details?: unknown } {
    return {
      code: this.code,
      message: this.message,
      ...(this.fix === undefined ? {} : { fix: this.fix }),
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}

export const isOkeError = (e: unknown): e is OkeError => e instanceof OkeError;

/** 422 OKE1422: a flow's input refused by its `in`; `flow` names whose, so a caller tells its own from a callee's. */
export class FlowInputError extends OkeError {
  readonly flow: string | undefined;
  constructor(init: { flow: string | undefined; message: string; details: unknown }) {
    super({ code: "OKE1422", message: init.message, status: 422, details: init.details });
    this.flow = init.flow;
  }
}

/**
 * A durable run's lease is held by another live instance; the caller should
 * skip it. Passing: the holder finishes or gives the run up, and the same
 * request then gets the run's answer.
 */
export class JournalLeaseBusy extends OkeError {
  override readonly name = "JournalLeaseBusy";
  readonly runId: string;
  constructor(runId: string) {
    super({
      code: "JournalLeaseBusy",
      message: `journal: run "${runId}" is leased by another instance`,
      status: 409,
      passing: true,
    });
    this.runId = runId;
  }
}

/**
 * A Clock resource is missing: a wake-early target that is missing or not
 * sleeping (`run "{id}" not found`), or a schedule no clock declares
 * (`cron "{name}" not found`).
 */
export class ClockResourceNotFoundError extends OkeError {
  override readonly name = "ClockResourceNotFoundError";
  /** What is missing: a durable run or a schedule. */
  readonly resource: "run" | "cron";
  /** The run id or the clock name that was asked for. */
  readonly id: string;
  /** The run id (kept for wake-early callers); for a schedule, its name. */
  readonly runId: string;
  /** `fix`: what the caller can do, e.g. that the run exists but is not sleeping (the message stays the spec's). */
  constructor(id: string, resource: "run" | "cron" = "run", fix?: string) {
    super({
      code: "ClockResourceNotFoundError",
      message: `${resource} "${id}" not found`,
      status: 404,
      ...(fix === undefined ? {} : { fix }),
    });
    this.resource = resource;
    this.id = id;
    this.runId = id;
  }
}

/** An operator tried to edit the spec of a clock declared without `overridable: true`. */
export class ScheduleNotOverridableError extends OkeError {
  override readonly name = "ScheduleNotOverridableError";
  readonly clock: string;
  constructor(clock: string) {
    super({
      code: "ScheduleNotOverridableError",
      message: `clock "${clock}" is not overridable`,
      fix: `Declare it with clock("${clock}", { overridable: true, … }) to let operators edit it; pausing works on any clock.`,
      status: 409,
    });
    this.clock = clock;
  }
}

/** Error texts the spec fixes word for word live here, so there is one copy of each. */
export const errors = {
  undeclaredRead: (flow: string, resource: string) =>
    new OkeError({
      code: "OKE1001",
      message: `Flow "${flow}" reads "${resource}" without declaring it.`,
      fix: `Add effects.reads: ["${resource}"] on that Flow.`,
      status: 500,
    }),
  onceBoundTwice: (signal: string, flows: readonly string[]) =>
    new OkeError({
      code: "OKE1071",
      message: `Once signal "${signal}" is bound to more than one Flow (${flows.join(", ")}).`,
      fix: "Use signal.broadcast if each flow should independently receive this event, or bind only one flow if these should compete for the same work.",
    }),
  unnamedSignalFlow: (trigger: string, where: string) =>
    new OkeError({
      code: "OKE1072",
      message: `A signal flow on "${trigger}" has no name (${where}).`,
      fix: 'Pass an explicit name — on(handle, flow("workers.email", { do })).',
    }),
  orphanEmit: (flow: string, signal: string) =>
    new OkeError({
      code: "OKE1240",
      message: `Flow "${flow}" emits signal "${signal}" with no subscriber.`,
      fix: "Add on(signal, …) or mark { optional: true }.",
      status: 500,
    }),
  invalidPayload: (resource: string, detail: string, issues?: unknown) =>
    new OkeError({
      code: "OKE1250",
      message: `"${resource}": ${detail}`,
      fix: "Align the payload with the schema — the worker never started.",
      status: 500,
      details: issues,
    }),
} as const;

/** The `{ code, message }` record a failure is journaled and dead-lettered as. */
export function errorRecord(e: unknown): { code: string; message: string } {
  if (e instanceof OkeError) return { code: storable(e.code), message: storable(e.message) };
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    const name = textOf(e.name);
    return {
      code: storable(typeof code === "string" ? code : name || "Error"),
      message: storable(textOf(e.message)),
    };
  }
  return { code: "Error", message: storable(textOf(e)) };
}

/**
 * Any thrown value as text, never throwing itself: `String()` throws for an object without a
 * prototype (no toString) or whose toString throws, and a failure that cannot be recorded would
 * leave its message or run unsettled.
 */
function textOf(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return String(v);
  } catch {
    try {
      return JSON.stringify(v) ?? Object.prototype.toString.call(v);
    } catch {
      return Object.prototype.toString.call(v);
    }
  }
}

// eslint-disable-next-line no-control-regex
const UNSTORABLE = /[\u0000\uD800-\uDFFF]/;
/** Failure text every driver can store: a NUL or a lone surrogate becomes U+FFFD (PostgreSQL refuses both). */
const storable = (s: string): string =>
  UNSTORABLE.test(s)
    ? (s.replaceAll("\u0000", "\uFFFD") as unknown as { toWellFormed(): string }).toWellFormed()
    : s;
