/** Resolves the Console's port, bind address and operator tokens, and decides whether it may run open. */
import type { ResolvedConfig } from "../app/config.ts";
import type { Env } from "../app/types.ts";

export const DEFAULT_CONSOLE_PORT = 6533;
/** Shortest operator token accepted. */
export const MIN_TOKEN_LENGTH = 16;

export interface ConsoleConfig {
  port: number;
  /** The port was set explicitly (config or OKE_CONSOLE_PORT): failing to bind it is an error, not a warning. */
  portExplicit: boolean;
  host: string;
  /** Reverse proxies in front of the Console whose X-Forwarded-For / X-Forwarded-Host count (0: none). */
  trustProxy: number;
  /** label → secret. Empty: the Console runs open (dev on loopback only). */
  tokens: Map<string, string>;
}

export type ConsoleDecision =
  | { run: true; config: ConsoleConfig; open: boolean }
  | { run: false; reason: "off" }
  | { run: false; reason: "refused"; message: string };

/**
 * 127.0.0.0/8 written as an IPv4 literal: exactly four dotted decimal octets, none above 255 and
 * none with a leading zero (`0177.0.0.1` is octal to some parsers). A name that merely starts with
 * `127.` — `127.attacker.example`, `127.0.0.1.nip.io` — is a DNS name its owner can point anywhere.
 */
export function isLoopbackIPv4(s: string): boolean {
  const parts = s.split(".");
  return (
    parts.length === 4 &&
    parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255) &&
    parts[0] === "127"
  );
}

/** An address to bind that is loopback: a 127.0.0.0/8 literal, `::1`, or `localhost` (resolved by the OS). */
export const isLoopbackAddress = (host: string): boolean =>
  host === "localhost" || host === "::1" || isLoopbackIPv4(host);

/**
 * A Host (or Origin) name, port and IPv6 brackets removed, that can only mean this machine: a
 * 127.0.0.0/8 literal, `::1`, `localhost` or a name under it (RFC 6761: `*.localhost` resolves to
 * loopback and no one can register it; browsers resolve it themselves). Every other name is one a
 * page on another site could resolve to 127.0.0.1 (DNS rebinding).
 */
export function isLoopbackName(name: string): boolean {
  const n = name.toLowerCase();
  // The fully qualified form (trailing dot) of a localhost name is the same name.
  const bare = n.endsWith(".localhost.") || n === "localhost." ? n.slice(0, -1) : n;
  return (
    bare === "localhost" ||
    (bare.endsWith(".localhost") && bare.length > ".localhost".length && !bare.startsWith(".")) ||
    n === "::1" ||
    isLoopbackIPv4(n)
  );
}

const NOT_STARTED = "okengine console: not started —";
const RUNS_ON = "The app runs on without a Console.";

/**
 * Whether and how the Console runs in this env. Never throws: a Console setting that is wrong
 * leaves the Console off with a `refused` message naming the problem and its fix — an operator
 * tool misconfigured (a token's variable unset in one deployment) must not stop the app.
 */
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
  let portFrom: string;
  if (c.port !== undefined) {
    port = c.port;
    portFrom = `console.port is ${JSON.stringify(c.port) ?? String(c.port)}`;
  } else if (portVar !== undefined && portVar !== "") {
    port = Number(portVar);
    portFrom = `OKE_CONSOLE_PORT is ${JSON.stringify(portVar)}`;
  } else {
    // Tests start many apps at once: the Console stays off there unless asked for.
    if (env === "test") return { run: false, reason: "off" };
    port = DEFAULT_CONSOLE_PORT;
    portExplicit = false;
    portFrom = "";
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    return refused(
      `${portFrom}, not a port number (0–65535). Set it to a port, or to false (OKE_CONSOLE_PORT=off) to turn the Console off.`,
    );
  const host = c.host ?? vars.OKE_CONSOLE_HOST ?? "127.0.0.1";
  const proxyVar = vars.OKE_CONSOLE_TRUST_PROXY;
  const trustProxy = c.trustProxy ?? (proxyVar === undefined || proxyVar === "" ? 0 : Number(proxyVar));
  if (!Number.isInteger(trustProxy) || trustProxy < 0 || trustProxy > 10)
    return refused(
      `${c.trustProxy !== undefined ? "console.trustProxy" : "OKE_CONSOLE_TRUST_PROXY"} is ${JSON.stringify(c.trustProxy ?? proxyVar)}, not a number of proxies (0–10). Set it to how many reverse proxies stand in front of the Console (1 for one nginx), or leave it unset.`,
    );

  // A token that is empty or short is a secret that was meant and is missing (its variable unset in
  // this deployment): the Console stays off rather than running open or half-locked.
  const tokens = new Map<string, string>();
  const problems: string[] = [];
  // A token must travel in an Authorization header: visible ASCII only. Spaces around it are stripped
  // by HTTP and other characters cannot be sent at all, so such a token worked on the page's sign-in
  // and never as `oke --token` (a 401, or "cannot reach the Console").
  const BEARER_SAFE = /^[\x21-\x7e]+$/;
  const notBearerSafe =
    "has a character a header cannot carry (a space, or one outside visible ASCII): `oke` could never send it";
  for (const [label, secret] of Object.entries(c.tokens ?? {}) as Array<[string, unknown]>) {
    if (secret === undefined || secret === null || secret === "")
      problems.push(`console token "${label}" is empty (is the variable it is read from set?)`);
    else if (typeof secret !== "string")
      problems.push(`console token "${label}" is a ${typeof secret}, not a string`);
    else if (secret.length < MIN_TOKEN_LENGTH)
      problems.push(`console token "${label}" is ${characters(secret.length)}, under ${MIN_TOKEN_LENGTH}`);
    else if (!BEARER_SAFE.test(secret)) problems.push(`console token "${label}" ${notBearerSafe}`);
    else tokens.set(label, secret);
  }
  const envToken = vars.OKE_CONSOLE_TOKEN;
  if (envToken !== undefined && envToken !== "") {
    if (envToken.length < MIN_TOKEN_LENGTH)
      problems.push(`OKE_CONSOLE_TOKEN is ${characters(envToken.length)}, under ${MIN_TOKEN_LENGTH}`);
    else if (!BEARER_SAFE.test(envToken)) problems.push(`OKE_CONSOLE_TOKEN ${notBearerSafe}`);
    else tokens.set(vars.OKE_CONSOLE_TOKEN_LABEL || "operator", envToken);
  }
  if (problems.length > 0)
    return refused(
      `${problems.join("; ")}. Set each token to a secret of ${MIN_TOKEN_LENGTH}+ characters (e.g. \`openssl rand -hex 16\`) and restart, or remove it; console.port: false turns the Console off.`,
    );
  if (tokens.size === 0) {
    if (env === "prod")
      return refused(
        `production needs an operator secret, and neither OKE_CONSOLE_TOKEN nor console.tokens is set. Set OKE_CONSOLE_TOKEN (${MIN_TOKEN_LENGTH}+ characters) to start it, or console.port: false to turn it off.`,
      );
    if (!isLoopbackAddress(host))
      return refused(
        `it would listen on ${host} without a token. Set OKE_CONSOLE_TOKEN, or bind it to 127.0.0.1.`,
      );
  }
  return { run: true, config: { port, portExplicit, host, tokens, trustProxy }, open: tokens.size === 0 };
}

const characters = (n: number): string => `${n} character${n === 1 ? "" : "s"}`;

const refused = (why: string): ConsoleDecision => ({
  run: false,
  reason: "refused",
  message: `${NOT_STARTED} ${why} ${RUNS_ON}`,
});
