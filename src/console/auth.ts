/** Console authentication: operator tokens (constant-time), browser sessions, cross-site checks, failed-login limits. */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { OkeError } from "../errors.ts";
import { isLoopbackName } from "./config.ts";

/**
 * The session cookie's name on a Console port. Browsers keep cookies per host, not per port, so two
 * apps' Consoles on one machine (localhost:6533 and localhost:6543) would overwrite each other's
 * session under one name; a name per port keeps each signed in.
 */
export const sessionCookieName = (port: number): string => `oke_console_${port}`;
/** Mutating calls must carry this header: a cross-site form or fetch cannot set it without a CORS preflight we never grant. */
export const CSRF_HEADER = "x-oke-console";
const SESSION_MS = 12 * 3_600_000;
/**
 * Live sessions kept at most; signing in past it ends the oldest. Sessions live in memory, and a
 * script that signs in on every run (instead of sending its bearer token) would otherwise grow the
 * map for twelve hours per sign-in.
 */
export const MAX_SESSIONS = 1_000;
/** Failed logins allowed per client address per window, then 429 until the window ends. */
const MAX_FAILURES = 10;
const FAILURE_WINDOW_MS = 60_000;

export const consoleErrors = {
  unauthenticated: () =>
    new OkeError({
      code: "OKE1601",
      message: "console: this request needs an operator token",
      fix: "Send `Authorization: Bearer <token>` (OKE_CONSOLE_TOKEN), or sign in on the Console page.",
      status: 401,
    }),
  badToken: () => new OkeError({ code: "OKE1602", message: "console: unknown operator token", status: 401 }),
  crossSite: (why: string) =>
    new OkeError({
      code: "OKE1603",
      message: `console: refused a cross-site or unmarked request (${why})`,
      fix: `Mutating calls need the "${CSRF_HEADER}: 1" header and, from a browser, the Console's own origin.`,
      status: 403,
    }),
  tooManyFailures: (retryAfterS: number) =>
    new OkeError({
      code: "OKE1604",
      message: `console: too many failed sign-ins from this address; try again in ${retryAfterS} s`,
      status: 429,
      details: { retryAfterS },
      passing: true,
    }),
  hostNotAllowed: (host: string) =>
    new OkeError({
      code: "OKE1607",
      message: `console: host "${host}" refused (an open Console answers loopback names only)`,
      status: 403,
    }),
} as const;

const digest = (s: string): Buffer => createHash("sha256").update(s).digest();

export interface Actor {
  label: string;
}

/** Tokens, sessions and the failure limiter of one Console server. */
export class ConsoleAuth {
  private readonly tokens: Array<{ label: string; digest: Buffer }>;
  private readonly sessions = new Map<string, { label: string; expires: number }>();
  /** The session cookie's name: per port (sessionCookieName), set once the server has its port. */
  cookieName = "oke_console";
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    tokens: Map<string, string>,
    readonly open: boolean,
    private readonly now: () => number = Date.now,
    /** Where a lockout is said (once per address and window): failed sign-ins leave a trace. */
    private readonly onLockout: (addr: string, failures: number) => void = () => undefined,
    /** Reverse proxies in front whose X-Forwarded-For counts (console.trustProxy). */
    private readonly trustProxy = 0,
  ) {
    this.tokens = [...tokens].map(([label, secret]) => ({ label, digest: digest(secret) }));
  }

  /** The token's label, comparing against every token in constant time (no early exit). */
  private match(token: string): string | undefined {
    const d = digest(token);
    let found: string | undefined;
    for (const t of this.tokens) if (timingSafeEqual(d, t.digest) && found === undefined) found = t.label;
    return found;
  }

  /** Throws 429 while an address is over its failure budget. */
  private checkLimit(addr: string): void {
    const f = this.failures.get(addr);
    if (f === undefined) return;
    const elapsed = this.now() - f.since;
    if (elapsed >= FAILURE_WINDOW_MS) this.failures.delete(addr);
    else if (f.count >= MAX_FAILURES)
      throw consoleErrors.tooManyFailures(Math.ceil((FAILURE_WINDOW_MS - elapsed) / 1000));
  }

  private fail(addr: string): void {
    const f = this.failures.get(addr);
    if (f === undefined || this.now() - f.since >= FAILURE_WINDOW_MS)
      this.failures.set(addr, { count: 1, since: this.now() });
    else if (++f.count === MAX_FAILURES) this.onLockout(addr, f.count);
    // Bounded: a flood of addresses cannot grow the map without limit.
    if (this.failures.size > 10_000) this.failures.delete(this.failures.keys().next().value!);
  }

  /**
   * An open Console answers loopback Host names only: a page on evil.example whose name its owner
   * re-points at 127.0.0.1 (DNS rebinding) sends its own name as Host. A token-locked Console
   * answers any Host (behind a proxy it has a real name); the token is what protects it.
   */
  checkHost(req: IncomingMessage): void {
    if (!this.open) return;
    const name = hostName(req.headers.host);
    if (name === undefined || !isLoopbackName(name))
      throw consoleErrors.hostNotAllowed(req.headers.host ?? "");
  }

  /** Who is calling, or a 401/403/429. */
  authenticate(req: IncomingMessage): Actor {
    if (this.open) {
      this.checkHost(req);
      return { label: "dev (open)" };
    }
    const addr = clientAddress(req, this.trustProxy);
    const auth = req.headers.authorization;
    if (auth !== undefined) {
      this.checkLimit(addr);
      const m = /^Bearer\s+(.+)$/i.exec(auth);
      const label = m ? this.match(m[1]!.trim()) : undefined;
      if (label === undefined) {
        this.fail(addr);
        throw consoleErrors.badToken();
      }
      return { label };
    }
    const sid = cookie(req, this.cookieName);
    const s = sid === undefined ? undefined : this.sessions.get(sid);
    if (s !== undefined && s.expires > this.now()) return { label: s.label };
    if (s !== undefined) this.sessions.delete(sid!);
    throw consoleErrors.unauthenticated();
  }

  /** Exchanges a token for a session id (the page's cookie). */
  login(req: IncomingMessage, token: unknown): { sid: string; label: string } {
    const addr = clientAddress(req, this.trustProxy);
    this.checkLimit(addr);
    const label = typeof token === "string" ? this.match(token) : undefined;
    if (label === undefined) {
      this.fail(addr);
      throw consoleErrors.badToken();
    }
    const sid = randomBytes(32).toString("base64url");
    this.dropExpired();
    // Oldest first: a Map iterates in insertion order, and every session lives equally long.
    while (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    this.sessions.set(sid, { label, expires: this.now() + SESSION_MS });
    return { sid, label };
  }

  /** Sessions signed in and not yet expired or ended. */
  get liveSessions(): number {
    this.dropExpired();
    return this.sessions.size;
  }

  /** Expired sessions leave the map at the next sign-in even when their cookie never comes back. */
  private dropExpired(): void {
    const now = this.now();
    // Insertion order is expiry order, so the scan stops at the first live one.
    for (const [sid, s] of this.sessions) {
      if (s.expires > now) break;
      this.sessions.delete(sid);
    }
  }

  logout(req: IncomingMessage): void {
    const sid = cookie(req, this.cookieName);
    if (sid !== undefined) this.sessions.delete(sid);
  }

  /** The Set-Cookie header of a new session. */
  sessionCookie(sid: string, secure: boolean): string {
    return `${this.cookieName}=${sid}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_MS / 1000}${secure ? "; Secure" : ""}`;
  }

  /** The Set-Cookie header that ends the session in the browser. */
  clearedCookie(): string {
    return `${this.cookieName}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
  }
}

/**
 * Cross-site protection for mutating calls: the custom header, and a same-origin Origin/Sec-Fetch-Site
 * when a browser sends them. An open Console also wants the Origin's name to be loopback: a page
 * served under a rebound name is same-origin with itself, so matching Host alone proves nothing.
 */
export function checkSameSite(req: IncomingMessage, open: boolean, trustProxy = 0): void {
  if (req.headers[CSRF_HEADER] === undefined) throw consoleErrors.crossSite(`no ${CSRF_HEADER} header`);
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none")
    throw consoleErrors.crossSite(`Sec-Fetch-Site: ${String(site)}`);
  const origin = req.headers.origin;
  if (origin === "null") throw consoleErrors.crossSite("Origin null");
  if (origin === undefined) return;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw consoleErrors.crossSite("malformed Origin");
  }
  // Behind trusted proxies the page's origin is the name the proxy was asked for (X-Forwarded-Host),
  // which a proxy that rewrites Host (nginx's default) no longer sends as Host.
  if (url.host !== forwardedHost(req, trustProxy)) throw consoleErrors.crossSite(`Origin ${origin}`);
  if (open) {
    const name = hostName(url.host);
    if (name === undefined || !isLoopbackName(name)) throw consoleErrors.crossSite(`Origin ${origin}`);
  }
}

/**
 * The name in a Host header, without its port or IPv6 brackets; undefined when the header is
 * missing or not `name[:port]` / `[v6][:port]`.
 */
/** One header's comma-separated list, trimmed (repeated headers joined). */
const headerList = (v: string | string[] | undefined): string[] =>
  (Array.isArray(v) ? v.join(",") : (v ?? ""))
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");

/**
 * The client's address: the connection's, or behind `trustProxy` proxies the X-Forwarded-For entry the
 * farthest trusted one appended (each appends the address it saw). Entries further left are the
 * client's to write, so they are never read; a list shorter than the proxies trusted gives its first.
 */
export function clientAddress(req: IncomingMessage, trustProxy: number): string {
  const socket = req.socket.remoteAddress ?? "?";
  if (trustProxy === 0) return socket;
  const list = headerList(req.headers["x-forwarded-for"]);
  if (list.length === 0) return socket;
  return list[Math.max(0, list.length - trustProxy)]!;
}

/** The Host the client asked for: X-Forwarded-Host (its last value, the nearest proxy's) behind trusted proxies, else Host. */
function forwardedHost(req: IncomingMessage, trustProxy: number): string | undefined {
  if (trustProxy > 0) {
    const fwd = headerList(req.headers["x-forwarded-host"]).at(-1);
    if (fwd !== undefined) return fwd;
  }
  return req.headers.host;
}

export function hostName(host: string | undefined): string | undefined {
  if (host === undefined) return undefined;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::\d{1,5})?$/.exec(host);
  return m === null ? undefined : (m[1] ?? m[2]);
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
