/** The Logger type (a pino subset) and the pretty / json / silent loggers. */
import { pino, type Logger as PinoLogger } from "pino";

export type Logger = Pick<
  PinoLogger,
  "info" | "warn" | "error" | "debug" | "trace" | "fatal" | "child" | "level"
>;

export type LogFormat = "pretty" | "json" | "silent";

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
      // pino-pretty prints a top-level `name` as the logger's name ("INFO (ada): …"). A field of
      // that name (a payload's, a user's) is shown as a field instead: `name : "ada"`.
      formatters: {
        log: (o) => {
          if (!("name" in o)) return o;
          const { name, ...rest } = o;
          return { ...rest, "name ": name };
        },
      },
      transport: {
        target: "pino-pretty",
        options: { colorize: process.stdout.isTTY, ignore: "pid,hostname", translateTime: "HH:MM:ss.l" },
      },
    });
  }
  return pino({ level, name: options.name });
}
