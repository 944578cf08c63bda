/** Turns anything that stops a boot into one readable line for the terminal. */
import { inspect } from "node:util";
import { postgresRefusal } from "../app/open-store.ts";
import { isOkeError, type OkeError } from "../errors.ts";

const withPrefix = (message: string): string => (/^oke[: ]/.test(message) ? message : `oke boot: ${message}`);

/** An OKE error as the terminal shows it: its message, then its code and fix. */
const oneText = (e: OkeError): string =>
  `${withPrefix(e.message)}\n  code: ${e.code}${e.fix === undefined ? "" : `\n  fix: ${e.fix}`}`;

/**
 * One readable text for anything that stops a boot: okengine's own errors keep
 * their exact text (`oke boot: journal driver "postgres" needs DATABASE_URL`),
 * OKE codes come with their code and fix. Stacks (the cause chain's too) only with OKE_DEBUG=1.
 */
export function describeBootError(e: unknown): string {
  let text: string;
  if (isOkeError(e)) {
    text = oneText(e);
  } else if (e instanceof Error) {
    const sys = e as NodeJS.ErrnoException & { port?: number };
    if (sys.code === "EADDRINUSE")
      text = `oke boot: port ${sys.port ?? "?"} is already in use (pass --port or set PORT)`;
    else if (sys.code === "EACCES" && sys.syscall === "listen")
      text = `oke boot: not allowed to listen on port ${sys.port ?? "?"}`;
    else {
      // PostgreSQL refusing the connection from a store the app was handed (createApp({ store })),
      // which boot does not wrap as it does the one it opens from DATABASE_URL (open-store.ts).
      const refused = postgresRefusal(e, undefined, "DATABASE_URL (or database.url)");
      text = refused === undefined ? withPrefix(e.message) : oneText(refused);
    }
  } else {
    text = `oke boot: ${String(e)}`;
  }
  if (process.env.OKE_DEBUG && e instanceof Error) text += `\n${stacks(e)}`;
  return text;
}

/**
 * The stack of `e` and of each error in its `cause` chain: what stopped a boot is often wrapped
 * ("cannot load src/flows/x.ts: …" around the error the user's own line threw), and the wrapper's
 * stack holds only okengine's frames.
 */
function stacks(e: Error): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  for (let c: unknown = e; c !== undefined && c !== null && !seen.has(c) && parts.length < 10;) {
    seen.add(c);
    const text = c instanceof Error ? (c.stack ?? `${c.name}: ${c.message}`) : inspect(c);
    parts.push(parts.length === 0 ? text : `Caused by: ${text}`);
    c = c instanceof Error ? c.cause : undefined;
  }
  return parts.join("\n");
}
