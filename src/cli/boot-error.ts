/** Turns anything that stops a boot into one readable line for the terminal. */
import { inspect } from "node:util";
import { isOkeError } from "../errors.ts";

const withPrefix = (message: string): string => (/^oke[: ]/.test(message) ? message : `oke boot: ${message}`);

/**
 * One readable text for anything that stops a boot: okengine's own errors keep
 * their exact text (`oke boot: journal driver "postgres" needs DATABASE_URL`),
 * OKE codes come with their code and fix. Stacks (the cause chain's too) only with OKE_DEBUG=1.
 */
export function describeBootError(e: unknown): string {
  let text: string;
  if (isOkeError(e)) {
    text = `${withPrefix(e.message)}\n  code: ${e.code}${e.fix === undefined ? "" : `\n  fix: ${e.fix}`}`;
  } else if (e instanceof Error) {
    const sys = e as NodeJS.ErrnoException & { port?: number };
    if (sys.code === "EADDRINUSE")
      text = `oke boot: port ${sys.port ?? "?"} is already in use (pass --port or set PORT)`;
    else if (sys.code === "EACCES" && sys.syscall === "listen")
      text = `oke boot: not allowed to listen on port ${sys.port ?? "?"}`;
    // pg's text, with no code: the URL asks for TLS (sslmode=require, ssl=true) and the server has none.
    else if (sys.code === undefined && e.message === "The server does not support SSL connections")
      text =
        "oke boot: the PostgreSQL server does not support SSL connections, but DATABASE_URL asks for SSL\n" +
        "  code: OKE1336\n" +
        "  fix: Enable SSL on the server (ssl = on), or drop sslmode=require / ssl=true from DATABASE_URL " +
        "(or database.url) for a server reached over a trusted network only.";
    else text = withPrefix(e.message);
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
