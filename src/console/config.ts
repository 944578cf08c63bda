/** Resolves the Console's port, bind address and operator tokens, and decides whether it may run open. */
import { OkeError } from "../errors.ts";
import type { ResolvedConfig } from "../app/config.ts";
import type { Env } from "../app/types.ts";

export const DEFAULT_CONSOLE_PORT = 6533;

export interface ConsoleConfig {
  port: number;
  /** The port was set explicitly (config or OKE_CONSOLE_PORT): failing to bind it is an error, not a warning. */
  portExplicit: boolean;
  host: string;
  /** label → secret. Empty: the Console runs open (dev on loopback only). */
  tokens: Map<string, string>;
}

export type ConsoleDecision =
  | { run: true; config: ConsoleConfig; open: boolean }
  | { run: false; reason: "off" }
  | { run: false; reason: "refused"; message: string };

export const isLoopback = (host: string): boolean =>
  host === "127.0.0.1" || host === "::1" || host === "localhost" || host.startsWith("127.");

const bad = (message: string): OkeError => new OkeError({ code: "OKE1094", message });

/** Whether and how the Console runs in this env. Throws OKE1094 on a malformed setting. */
export function decideConsole(
  config: Pick<ResolvedConfig, "console">,
  env: Env,
  vars: NodeJS.ProcessEnv = process.env,
): ConsoleDecision {
  const c = config.console;
  const portVar = vars.OKE_CONSOLE_PORT;
  if (c.port === false || portVar === "off" || portVar === "false") return { run: false, reason: "off" };
  let port: number;
  let portExplicit = true;
  if (c.port !== undefined) port = c.port;
  else if (portVar !== undefined && portVar !== "") port = Number(portVar);
  else {
    // Tests start many apps at once: the Console stays off there unless asked for.
    if (env === "test") return { run: false, reason: "off" };
    port = DEFAULT_CONSOLE_PORT;
    portExplicit = false;
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw bad(`oke boot: console.port must be a port number or false, got ${String(c.port ?? portVar)}`);
  const host = c.host ?? vars.OKE_CONSOLE_HOST ?? "127.0.0.1";
  const tokens = new Map<string, string>();
  for (const [label, secret] of Object.entries(c.tokens ?? {})) {
    if (typeof secret !== "string" || secret.length < 16)
      throw bad(`oke boot: console token "${label}" must be a string of at least 16 characters`);
    tokens.set(label, secret);
  }
  const envToken = vars.OKE_CONSOLE_TOKEN;
  if (envToken !== undefined && envToken !== "") {
    if (envToken.length < 16) throw bad("oke boot: OKE_CONSOLE_TOKEN must be at least 16 characters");
    tokens.set(vars.OKE_CONSOLE_TOKEN_LABEL || "operator", envToken);
  }
  if (tokens.size === 0) {
    if (env === "prod")
      return {
        run: false,
        reason: "refused",
        message:
          "okengine console: not started — production needs an operator secret, and neither OKE_CONSOLE_TOKEN nor console.tokens is set. Set OKE_CONSOLE_TOKEN (16+ characters) to start it, or console.port: false to turn it off. The app runs on without a Console.",
      };
    if (!isLoopback(host))
      return {
        run: false,
        reason: "refused",
        message: `okengine console: not started — it would listen on ${host} without a token. Set OKE_CONSOLE_TOKEN, or bind it to 127.0.0.1.`,
      };
  }
  return { run: true, config: { port, portExplicit, host, tokens }, open: tokens.size === 0 };
}
