/** Turns anything that stops a boot into one readable line for the terminal. */
import { isOkeError } from "../errors.ts";

const withPrefix = (message: string): string => (/^oke[: ]/.test(message) ? message : `oke boot: ${message}`);

/**
 * One readable text for anything that stops a boot: okengine's own errors keep
 * their exact text (`oke boot: journal driver "postgres" needs DATABASE_URL`),
 * OKE codes come with their code and fix. Stacks only with OKE_DEBUG=1.
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
    else text = withPrefix(e.message);
  } else {
    text = `oke boot: ${String(e)}`;
  }
  if (process.env.OKE_DEBUG && e instanceof Error && e.stack) text += `\n${e.stack}`;
  return text;
}
