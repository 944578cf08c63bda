// The `oke` operator commands' HTTP client for a running app's Console API: bearer token, CSRF header, readable failures.

export const DEFAULT_CONSOLE_URL = "http://127.0.0.1:6533";

let quietInstalled = false;
/**
 * Exits quietly when stdout's reader goes away (`oke dead x | head`): what was asked is done, and
 * the rest of the output has no one to read it. Installed once per process.
 */
export function quietOnClosedStdout(): void {
  if (quietInstalled) return;
  quietInstalled = true;
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw e;
  });
}

/**
 * Exit codes of the operator commands: 1 the Console answered with an error, or the command was
 * malformed (a bad --url too); 2 it could not be reached or what answered is not a Console.
 */
export const EXIT_REFUSED = 1;
export const EXIT_UNREACHABLE = 2;

/** A failed operator command: the text to print and the exit code. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    /** The Console's answer, when it answered with an error: its status and code. */
    readonly answer?: { status: number; code: string },
  ) {
    super(message);
    this.name = "CommandError";
  }
}

export interface ClientOptions {
  url?: string;
  token?: string;
  /** Per request (ms). Default 15 000. */
  timeoutMs?: number;
}

/** Whether an answer has the shape a command reads; one that does not is not a Console's. */
export type Shape<T> = (value: unknown) => value is T;

export interface ConsoleClient {
  readonly url: string;
  get<T>(path: string, shape?: Shape<T>): Promise<T>;
  post<T>(path: string, body?: unknown, shape?: Shape<T>): Promise<T>;
}

interface ApiErrorBody {
  error?: { code?: string; message?: string; fix?: string };
}

/** The Console's base URL; a malformed one is a malformed command (exit 1), not an unreachable Console. */
function baseUrl(raw: string | undefined): string {
  // An empty address is refused, not read as the default: a script whose variable is unset would
  // otherwise act on whatever app listens on this machine.
  if (raw !== undefined && raw.trim() === "")
    throw new CommandError(
      `oke: the Console URL is empty: give the Console's address (e.g. ${DEFAULT_CONSOLE_URL}), or leave it out for that default`,
      EXIT_REFUSED,
    );
  const text = raw ?? DEFAULT_CONSOLE_URL;
  let u: URL;
  try {
    u = new URL(/^[a-z]+:\/\//i.test(text) ? text : `http://${text}`);
  } catch {
    throw new CommandError(`oke: "${text}" is not a Console URL (e.g. ${DEFAULT_CONSOLE_URL})`, EXIT_REFUSED);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new CommandError(`oke: the Console URL must be http:// or https://, got "${text}"`, EXIT_REFUSED);
  return u.href.replace(/\/+$/, "");
}

/** Why a fetch failed, in a word the operator recognises (ECONNREFUSED, ENOTFOUND, timeout…). */
function causeOf(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && e.name === "TimeoutError") return `no answer within ${seconds(timeoutMs)}`;
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
}

/** Whether nothing listens at the address: the connection (every address tried) was refused. */
function refused(e: unknown): boolean {
  const cause = (e as { cause?: { code?: unknown; errors?: unknown } }).cause;
  if (cause?.code === "ECONNREFUSED") return true;
  const all = Array.isArray(cause?.errors) ? (cause.errors as Array<{ code?: unknown }>) : [];
  return all.length > 0 && all.every((x) => x.code === "ECONNREFUSED");
}

/**
 * Said under a refused connection: a production app without an operator token runs, and serves its
 * HTTP port, with its Console's port never opened, which from here looks like no app at all. True
 * in dev too (nothing listens; there the Console is open by default), so it is said every time.
 */
export const PROD_CONSOLE_HINT =
  "  hint: nothing listens there. In prod (oke start) the Console starts only with OKE_CONSOLE_TOKEN (or console.tokens) set; the app's boot log says so (okengine console: not started)";

const seconds = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

export function createConsoleClient(options: ClientOptions): ConsoleClient {
  const url = baseUrl(options.url);
  const token = options.token === "" ? undefined : options.token;
  const timeoutMs = options.timeoutMs ?? 15_000;

  async function call<T>(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    shape: Shape<T> | undefined,
  ): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (method === "POST") {
      headers["content-type"] = "application/json";
      headers["x-oke-console"] = "1";
    }
    let res: Response;
    try {
      res = await fetch(url + path, {
        method,
        headers,
        body: method === "POST" ? JSON.stringify(body ?? {}) : undefined,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      throw new CommandError(
        `oke: cannot reach the Console at ${url} (${causeOf(e, timeoutMs)}). Is the app running with its Console on? Pass --url or set OKE_CONSOLE_URL.` +
          (refused(e) ? `\n${PROD_CONSOLE_HINT}` : ""),
        EXIT_UNREACHABLE,
      );
    }
    // The timeout covers the body too: an answer that stalls or is cut off half-way is no answer.
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw new CommandError(
        `oke: the Console at ${url} did not finish its answer (${res.status}, then ${causeOf(e, timeoutMs)})${method === "POST" ? "; the action may or may not have been done: check before running it again" : ""}`,
        EXIT_UNREACHABLE,
      );
    }
    const notConsole = (what: string, appAnswer = false): CommandError =>
      // A gateway's error (a proxy in front of the Console, the app behind it down): not a Console
      // at the wrong port, but one that cannot be reached through it.
      !appAnswer && (res.status === 502 || res.status === 503 || res.status === 504)
        ? new CommandError(
            `oke: the Console at ${url} cannot be reached: what answered is in front of it (a proxy or load balancer?) and said ${res.status} ${res.statusText || "(no reason)"}: the app behind it is down or unreachable`,
            EXIT_UNREACHABLE,
          )
        : new CommandError(
            `oke: ${url} is not a Console: it answered ${res.status} with ${what} (is --url the Console port, 6533 by default, rather than the app's?)`,
            EXIT_UNREACHABLE,
          );
    let parsed: unknown;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      throw notConsole("something that is not the Console's JSON");
    }
    // An okengine app's own HTTP port answers in its envelope, { ok, data | error }, which the
    // Console never uses: its 404 for /api/… is "no route", not a refusal by a Console.
    const answer = typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {};
    if (typeof answer.ok === "boolean" && ("data" in answer || "error" in answer)) {
      const appCode = (answer as ApiErrorBody).error?.code;
      throw notConsole(`an okengine app's answer${appCode === undefined ? "" : ` (${appCode})`}`, true);
    }
    if (res.ok) {
      // A 200 in JSON that is not what this command reads (`{"status":"ok"}` from a health check).
      if (shape !== undefined && !shape(parsed)) throw notConsole("JSON that is not the Console's");
      return parsed as T;
    }
    const err = (parsed as ApiErrorBody | undefined)?.error;
    // Whatever answered an error without the Console's { error: { code, message } } is something else.
    if (typeof err?.code !== "string" || typeof err.message !== "string")
      throw notConsole(parsed === undefined ? "an empty body" : "JSON that is not the Console's");
    const code = err.code;
    // The Console's own messages start "console: ", which this line already says.
    const message = err.message.replace(/^console: /, "");
    // What happened, said as the status means it: a 404 is not a refusal, a 501 is what the app's
    // store cannot do (its message says so; trying again does not help), and another 5xx is the
    // Console failing to answer (try again), not a judgement on the request.
    const said =
      res.status === 404 || res.status === 501
        ? ""
        : res.status >= 500
          ? "the Console could not answer: "
          : "the Console refused: ";
    let line = `oke: ${said}${message} (${res.status}${code ? ` ${code}` : ""})`;
    if (res.status === 401)
      line +=
        token === undefined
          ? "\n  fix: pass --token <token> or set OKE_CONSOLE_TOKEN to an operator token of that app"
          : "\n  fix: that token is not one of the app's operator tokens (console.tokens / OKE_CONSOLE_TOKEN)";
    else if (err.fix) line += `\n  fix: ${err.fix}`;
    throw new CommandError(line, EXIT_REFUSED, { status: res.status, code });
  }

  return {
    url,
    get: (path, shape) => call("GET", path, undefined, shape),
    post: (path, body, shape) => call("POST", path, body, shape),
  };
}
