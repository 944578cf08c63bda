/** Starts the Console beside a running app: decides whether it may run (tokens, env, bind address), serves it, says so in the log. */
import type { ResolvedConfig } from "../app/config.ts";
import { OkeError } from "../errors.ts";
import { decideConsole } from "./config.ts";
import type { ConsoleHost } from "./host.ts";
import { startConsoleServer, type ConsoleServer } from "./server.ts";

export type { ConsoleHost } from "./host.ts";
export type { ConsoleServer } from "./server.ts";
export { startHeartbeat, type Heartbeat } from "./heartbeat.ts";

/** The Console for `app.start()`, or undefined when it is off or refused (the log says which). */
export async function startConsole(
  host: ConsoleHost,
  config: Pick<ResolvedConfig, "console">,
): Promise<ConsoleServer | undefined> {
  const decision = decideConsole(config, host.env);
  if (!decision.run) {
    if (decision.reason === "refused") host.logger.warn(decision.message);
    return undefined;
  }
  const { config: c, open } = decision;
  let server: ConsoleServer;
  try {
    server = await startConsoleServer(host, c, open);
  } catch (e) {
    if (e instanceof OkeError) throw e;
    const code = (e as { code?: unknown }).code;
    if (code === "EADDRINUSE" && !c.portExplicit) {
      // The default port is taken (another app on this machine): the app runs on without a Console.
      host.logger.warn(
        `okengine console: port ${c.port} is in use; not started (set console.port or OKE_CONSOLE_PORT)`,
      );
      return undefined;
    }
    throw new OkeError({
      code: "OKE1609",
      message: `okengine console: cannot listen on ${c.host}:${c.port} (${String(code ?? e)})`,
      fix: "Pick another console.port (or OKE_CONSOLE_PORT), or turn the Console off with console.port: false.",
      cause: e,
    });
  }
  host.logger.info(
    `okengine console on ${server.url} (${open ? "open: dev on loopback, no token" : `token required, ${c.tokens.size} token${c.tokens.size === 1 ? "" : "s"}`})`,
  );
  return server;
}
