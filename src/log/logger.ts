/** The Logger type (a pino subset) and the pretty / json / silent loggers. */
import { pino, stdSerializers, type Logger as PinoLogger } from "pino";

export type Logger = Pick<
  PinoLogger,
  "info" | "warn" | "error" | "debug" | "trace" | "fatal" | "child" | "level"
>;

export type LogFormat = "pretty" | "json" | "silent";

/** A plain value a log line may carry as it is: no class instance (a pg.Client, a socket) rides along. */
function isData(v: unknown, depth = 0): boolean {
  if (v === null || (typeof v !== "object" && typeof v !== "function")) return true;
  if (typeof v === "function" || depth > 4) return false;
  if (Array.isArray(v)) return v.every((x) => isData(x, depth + 1));
  const proto: unknown = Object.getPrototypeOf(v);
  return (
    (proto === Object.prototype || proto === null) && Object.values(v).every((x) => isData(x, depth + 1))
  );
}

/**
 * `e` as a log line should carry it: its class (for the `type`), message, stack, cause and every
 * field of plain data (`code`, pg's `detail` and `severity`, an OkeError's `fix` and `details`),
 * without the objects libraries hang on errors — pg-pool sets `client` on an idle connection's
 * error, and pino's serializer wrote out the whole pg.Client: 4–5 KB a line, every prepared
 * statement's SQL. Anything not an Error is returned as it is.
 */
export function errorForLog(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  const copy = Object.create(Object.getPrototypeOf(e) as object) as Error & Record<string, unknown>;
  const hidden = (key: string, value: unknown): void =>
    void Object.defineProperty(copy, key, { value, writable: true, configurable: true, enumerable: false });
  hidden("message", e.message);
  hidden("stack", e.stack);
  // pino's serializer appends a cause's message and stack only, never its fields.
  if (e.cause !== undefined) hidden("cause", e.cause);
  const errors = (e as { errors?: unknown }).errors;
  if (Array.isArray(errors)) hidden("errors", errors.map(errorForLog));
  for (const [key, value] of Object.entries(e)) {
    if (value instanceof Error) copy[key] = errorForLog(value);
    else if (isData(value)) copy[key] = value;
  }
  return copy;
}

/** pino's `err` serializer, over errorForLog: every logger okengine makes uses it. */
export const errSerializer = (e: unknown): unknown => stdSerializers.err(errorForLog(e) as Error);

/**
 * pino-pretty's options for readable lines. `serves` is the boot line's summary (lifecycle-log.ts):
 * for JSON logs only, since its readable message already lists every route, worker and durable flow.
 */
export const PRETTY_OPTIONS = { ignore: "pid,hostname,serves", translateTime: "HH:MM:ss.l" } as const;

/**
 * Readable lines in dev, one JSON object per line in prod, nothing in tests
 * unless OKE_LOG_LEVEL asks for it.
 */
export function createLogger(options: { format: LogFormat; level?: string; name?: string }): Logger {
  const wanted = options.level ?? process.env.OKE_LOG_LEVEL;
  // Tests stay quiet, unless OKE_LOG_LEVEL asks (then readable lines, as in dev).
  if (options.format === "silent" && wanted === undefined) return pino({ level: "silent" });
  const level = wanted ?? "info";
  if (options.format === "pretty" || options.format === "silent") {
    return pino({
      level,
      name: options.name,
      serializers: { err: errSerializer },
      // pino-pretty prints a top-level `name` as the logger's name ("INFO (ada): …"). A field of
      // that name (a payload's, a user's) is shown as a field instead: `name : "ada"`.
      formatters: {
        log: (o) => {
          if (!("name" in o)) return o;
          const { name, ...rest } = o;
          return { ...rest, "name ": name };
        },
      },
      transport: { target: "pino-pretty", options: { ...PRETTY_OPTIONS, colorize: process.stdout.isTTY } },
    });
  }
  return pino({ level, name: options.name, serializers: { err: errSerializer } });
}
