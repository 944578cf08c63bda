/**
 * The logger every bench app gets: warnings and errors as JSON lines on stderr. A silent logger hid a
 * bench app's errors (one kept running after its schema was dropped and logged 83 of them unseen).
 * The bench's own planned failures (S6's "fails on purpose") are counted, not printed: one line per
 * failed attempt would flood the terminal and cost the measurement they belong to.
 */
import { pino, type DestinationStream, type Logger } from "pino";

/** The text every planned failure of a bench handler carries (compare/failures.ts). */
export const PLANNED_FAILURE = "fails on purpose";

/** Records withheld because they report a planned failure, in this process. */
let withheld = 0;
export const plannedFailuresWithheld = (): number => withheld;

const planned = (args: unknown[]): boolean =>
  args.some((a) => typeof a === "string" && a.includes(PLANNED_FAILURE));

/**
 * A pino logger at level `warn` on stderr (process.stderr is synchronous for files and pipes on Linux,
 * so nothing is lost at the bench's process.exit). `dest` replaces stderr (tests).
 */
export function benchLogger(dest: DestinationStream = process.stderr): Logger {
  return pino(
    {
      level: "warn",
      hooks: {
        logMethod(args, method) {
          if (planned(args)) {
            withheld++;
            return;
          }
          method.apply(this, args);
        },
      },
    },
    dest,
  );
}

/**
 * Shows a bench child process's stderr on this process's stderr, line by line, and keeps the tail of
 * what is not a warning (a pino record below level 50) for the child's error message.
 */
export function forwardStderr(stream: NodeJS.ReadableStream | null | undefined): () => string {
  let tail = "";
  let partial = "";
  const tty = process.stderr.isTTY === true;
  stream?.setEncoding("utf8");
  stream?.on("data", (d: string) => {
    const lines = (partial + d).split("\n");
    partial = lines.pop()!;
    for (const line of lines) {
      // On a terminal the progress line is rewritten in place: clear it first.
      process.stderr.write(`${tty ? "\r\x1b[K" : ""}${line}\n`);
      if (!isWarning(line)) tail = `${tail}${line}\n`.slice(-2_000);
    }
  });
  return () => (partial && !isWarning(partial) ? `${tail}${partial}` : tail);
}

function isWarning(line: string): boolean {
  if (!line.startsWith("{")) return line.trim() === "";
  try {
    const level = (JSON.parse(line) as { level?: unknown }).level;
    return typeof level === "number" && level < 50;
  } catch {
    return false;
  }
}
