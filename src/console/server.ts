/** The Console's own HTTP server: the JSON API under /api, the prebuilt page at /, authentication in front of both. */
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import type { AddressInfo } from "node:net";
import FindMyWay from "find-my-way";
import { OkeError } from "../errors.ts";
import { handlers, type ApiDeps } from "./api.ts";
import { checkSameSite, ConsoleAuth, sessionCookieName } from "./auth.ts";
import type { ConsoleConfig } from "./config.ts";
import type { ConsoleHost } from "./host.ts";
import { ReplayJobs } from "./replay-jobs.ts";

const BODY_LIMIT = 64 * 1024;

export interface ConsoleServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

/** The page's files, written by hand (no bundler): src/console/page/, copied to dist/console/page/ by the build. */
const PAGE_FILES: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/console.js": { file: "console.js", type: "text/javascript; charset=utf-8" },
  "/console.css": { file: "console.css", type: "text/css; charset=utf-8" },
};

// Everything comes from this origin; no inline script, no framing.
const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

export interface PageFile {
  type: string;
  body: Buffer;
}

/**
 * Where the page is looked for: beside this module (src/console/page/, or dist/console/page/ in the
 * package), then a checkout's src/ seen from code compiled or bundled two levels below the repository
 * (dist/, the test suite's builds).
 */
const PAGE_DIRS: readonly URL[] = [
  new URL("./page/", import.meta.url),
  new URL("../../src/console/page/", import.meta.url),
];

/**
 * Reads the page's three files (~36 KB) once, at start. A file found in none of `dirs` is a broken
 * install: the Console refuses to start and says so, instead of answering every page load with an
 * empty reply.
 */
export async function loadPage(dirs: readonly URL[] = PAGE_DIRS): Promise<Map<string, PageFile>> {
  const page = new Map<string, PageFile>();
  for (const [path, { file, type }] of Object.entries(PAGE_FILES)) {
    let first: unknown;
    for (const dir of dirs) {
      try {
        page.set(path, { type, body: await readFile(new URL(file, dir)) });
        break;
      } catch (e) {
        first ??= e;
      }
    }
    if (!page.has(path))
      throw new OkeError({
        code: "OKE1608",
        message: `okengine console: its page file ${fileURLToPath(new URL(file, dirs[0]))} cannot be read (${(first as { code?: string }).code ?? String(first)})`,
        fix: "The okengine install is incomplete: reinstall it (npm ci), or turn the Console off with console.port: false.",
        cause: first,
      });
  }
  return page;
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    ...headers,
  });
  // HEAD: the GET's status and headers, no body (HTTP's rule; a monitor's probe asks this way).
  res.end(res.req.method === "HEAD" ? undefined : text);
}

function sendError(res: ServerResponse, e: OkeError): void {
  const retry = (e.details as { retryAfterS?: number } | undefined)?.retryAfterS;
  send(res, e.status, { error: e.toJSON() }, retry === undefined ? {} : { "retry-after": String(retry) });
}

/** Seconds an operator's client should wait before asking again while the store is down. */
const STORE_RETRY_AFTER_S = 2;

/** 503 OKE1610: the store said it cannot commit; every answer would be a failure until it recovers. */
function storeUnavailable(since: number): OkeError {
  return new OkeError({
    code: "OKE1610",
    message: `console: the app's store is unavailable (since ${new Date(since).toISOString()}); try again in ${STORE_RETRY_AFTER_S} s`,
    fix: "The app probes the store until it can commit again; its log says why the store failed.",
    status: 503,
    details: { retryAfterS: STORE_RETRY_AFTER_S },
    // Operators read this on a token-protected port; the reason stays in the app's log.
    expose: true,
    passing: true,
  });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT)
      throw new OkeError({
        code: "OKE1605",
        message: `console: request body over ${BODY_LIMIT} bytes`,
        status: 413,
      });
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  const type = req.headers["content-type"] ?? "";
  if (!/^application\/json\b/i.test(type))
    throw new OkeError({
      code: "OKE1605",
      message: "console: send the body as application/json",
      status: 415,
    });
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new OkeError({
      code: "OKE1605",
      message: "console: the request body is not valid JSON",
      status: 400,
    });
  }
}

type Route = { kind: "api"; key: string } | { kind: "login" } | { kind: "logout" } | { kind: "whoami" };

export async function startConsoleServer(
  host: ConsoleHost,
  config: ConsoleConfig,
  open: boolean,
): Promise<ConsoleServer> {
  const page = await loadPage();
  const auth = new ConsoleAuth(
    config.tokens,
    open,
    Date.now,
    (addr, failures) =>
      host.logger.warn(
        { addr, failures },
        `console: ${failures} failed sign-ins from ${addr} within a minute; its sign-ins are refused (429 OKE1604) until the minute is over`,
      ),
    config.trustProxy,
  );
  const jobs = new ReplayJobs(host, (job) => {
    host.logger.info(
      { job: job.id, signal: job.signal, replayed: job.replayed, state: job.state },
      "console: paced replay ended",
    );
  });
  const deps: ApiDeps = {
    host,
    jobs,
    audit: async (entry) => {
      await host.store.recordAudit({ ...entry, at: host.clock.now() });
      // Counts and ids only: payloads never reach the log.
      host.logger.info(
        { actor: entry.actor, action: entry.action, target: entry.target, count: entry.detail.count },
        "console: operator action",
      );
    },
  };
  // find-my-way refuses a parameter over 100 characters by default (a 404 OKE1606): a signal named
  // that long, or a broadcast's copies queue (`~broadcast:<signal>:<flow>`) of two 45-character
  // names, could not be opened, replayed or discarded. Names have no length limit of their own;
  // Node's header limit (16 KB) bounds the URL.
  const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 16_384 });
  const noop = (): void => undefined;
  for (const key of Object.keys(handlers)) {
    const [method, path] = key.split(" ") as [FindMyWay.HTTPMethod, string];
    router.on(method, path, noop, { kind: "api", key } satisfies Route);
  }
  router.on("POST", "/api/login", noop, { kind: "login" } satisfies Route);
  router.on("POST", "/api/logout", noop, { kind: "logout" } satisfies Route);
  router.on("GET", "/api/whoami", noop, { kind: "whoami" } satisfies Route);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // Before anything else, whatever the path: an open Console answers loopback Host names only.
    auth.checkHost(req);
    const url = new URL(req.url ?? "/", "http://console.invalid");
    const method = req.method ?? "GET";
    const read = method === "GET" || method === "HEAD";
    const file = page.get(url.pathname);
    if (file && read) {
      // The page itself holds no data: it loads, then asks /api (which authenticates) for everything.
      res.writeHead(200, { "content-type": file.type, "cache-control": "no-cache", ...PAGE_HEADERS });
      res.end(method === "HEAD" ? undefined : file.body);
      return;
    }
    if (url.pathname === "/favicon.ico" && read) {
      // Browsers ask for it on every page load; an answer with no icon keeps a 404 out of their console.
      res.writeHead(204, { "cache-control": "max-age=86400", ...PAGE_HEADERS });
      res.end();
      return;
    }
    const found = router.find((method === "HEAD" ? "GET" : method) as FindMyWay.HTTPMethod, url.pathname);
    if (!found) {
      throw new OkeError({
        code: "OKE1606",
        message: `console: no endpoint ${method} ${url.pathname}`,
        status: 404,
      });
    }
    const route = found.store as Route;
    const mutating = method !== "GET" && method !== "HEAD";
    if (mutating) checkSameSite(req, open, config.trustProxy);
    const body = mutating ? await readJson(req) : undefined;
    if (route.kind === "login") {
      const token = (body as { token?: unknown } | undefined)?.token;
      if (open) return send(res, 200, { label: "dev (open)", open: true });
      const { sid, label } = auth.login(req, token);
      // The client's scheme: the first of a proxy chain's list ("https, http").
      const secure =
        String(req.headers["x-forwarded-proto"] ?? "")
          .split(",")[0]!
          .trim() === "https";
      return send(res, 200, { label, open: false }, { "set-cookie": auth.sessionCookie(sid, secure) });
    }
    if (route.kind === "logout") {
      auth.logout(req);
      return send(res, 200, { ok: true }, { "set-cookie": auth.clearedCookie() });
    }
    const actor = auth.authenticate(req);
    if (route.kind === "whoami")
      return send(res, 200, {
        label: actor.label,
        open,
        env: host.env,
        ...(host.root === undefined ? {} : { root: host.root }),
      });
    // Every endpoint below reads or writes the store: while it reports itself down, say so at once
    // rather than wait on it and answer a 500.
    const health = host.store.health();
    if (!health.ok) throw storeUnavailable(health.since);
    const out = await handlers[route.key]!(deps, {
      params: found.params,
      query: url.searchParams,
      body,
      actor: actor.label,
    });
    send(res, out.status ?? 200, out.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (e instanceof OkeError && (e.status < 500 || e.code === "OKE1610")) return sendError(res, e);
      // A call that failed because the store went down just now (the failure turned its health).
      const health = host.store.health();
      if (!health.ok) {
        if (!res.headersSent) sendError(res, storeUnavailable(health.since));
        else res.destroy();
        return;
      }
      // A 5xx not meant for clients (expose false: a driver's message may carry a path or SQL) is
      // answered as OKE1600; the error itself goes to the log below.
      const err =
        e instanceof OkeError && e.expose
          ? e
          : new OkeError({
              code: "OKE1600",
              message: "console: internal error (the app's log has the cause)",
              cause: e,
            });
      // The error, never the request body.
      host.logger.error(
        { err: e, method: req.method, path: req.url?.split("?")[0] },
        "console: request failed",
      );
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => host.logger.error({ err: e }, "console: server error"));
  const port = (server.address() as AddressInfo).port;
  auth.cookieName = sessionCookieName(port);
  const shownHost = config.host.includes(":") ? `[${config.host}]` : config.host;
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `http://${shownHost}:${port}`,
    close() {
      closed ??= (async () => {
        jobs.stopAll();
        const listening = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        // Operators' open tabs poll; nothing they hold is worth waiting for.
        setTimeout(() => server.closeAllConnections(), 1_000).unref();
        // A replay batch already sent lands before the store closes (none goes out after stopAll).
        await Promise.all([listening, jobs.settled()]);
      })();
      return closed;
    },
  };
}
