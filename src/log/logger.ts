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
  if (options.format === "silent") return pino({ level: "silent" });
  const level = options.level ?? process.env.OKE_LOG_LEVEL ?? "info";
  if (options.format === "pretty") {
    return pino({
      level,
      name: options.name,
      transport: {
        target: "pino-pretty",
        options: { colorize: process.stdout.isTTY, ignore: "pid,hostname", translateTime: "HH:MM:ss.l" },
      },
    });
  }
  return pino({ level, name: options.name });
}
