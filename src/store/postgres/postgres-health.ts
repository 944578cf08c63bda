/** PostgreSQL health: which errors mean the database is unreachable, and the bounded probe that says it is back. */
import pg from "pg";
import { OkeError } from "../../errors.ts";

/** How long one probe may take to connect, and then to commit. */
export const PROBE_TIMEOUT_MS = 2_000;

// SQLSTATE classes of an unavailable server: connection exception, insufficient resources (disk full,
// out of memory), operator intervention (shutdown, cannot connect now), system error, internal error.
const OUTAGE_CLASSES = new Set(["08", "53", "57", "58", "XX"]);
// Class 57 but a server that is up: a statement cancelled (statement_timeout, pg_cancel_backend).
// Counted as an outage, a 50 ms statement_timeout flipped the store down and up 78 times in 35 s.
const NOT_OUTAGE = new Set(["57014"]);
const NODE_NET = /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|NOTFOUND|AI_AGAIN)$/;
// `timeout expired`: pg's own connectionTimeoutMillis ending a connect (see connectTimedOut below).
const PG_CLIENT =
  /connection terminated|timeout exceeded when trying to connect|not queryable|connection error|^timeout expired$/i;

/**
 * A connect that pg's connectionTimeoutMillis ended (`timeout expired`, no code) as an ETIMEDOUT
 * naming the bound, so a log line or OKE1096 says what ran out; any other error unchanged.
 */
export function connectTimedOut(e: unknown, timeoutMs: number): unknown {
  if (!(e instanceof Error) || e.message !== "timeout expired" || "code" in e) return e;
  return Object.assign(new Error(`connection attempt timed out after ${timeoutMs} ms`, { cause: e }), {
    code: "ETIMEDOUT",
  });
}

/** True for an error that says the database cannot be reached or cannot commit, not that a statement was refused. */
export function isPostgresOutage(e: unknown): boolean {
  if (e instanceof OkeError) return e.cause !== undefined && isPostgresOutage(e.cause);
  if (typeof e !== "object" || e === null) return false;
  const code = (e as { code?: unknown }).code;
  // A database an administrator closed to connections (ALLOW_CONNECTIONS false, as a restore or a
  // maintenance window does): the connect fails with class 55, which otherwise means a statement
  // refused for the state of an object.
  if (code === "55000" && e instanceof Error && /not currently accepting connections/.test(e.message))
    return true;
  if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code))
    return OUTAGE_CLASSES.has(code.slice(0, 2)) && !NOT_OUTAGE.has(code);
  if (typeof code === "string" && NODE_NET.test(code)) return true;
  return e instanceof Error && PG_CLIENT.test(e.message);
}

/**
 * Opens its own connection (so a busy pool cannot make a healthy database look
 * down) and commits a transaction that takes a transaction id: a commit record
 * is written to the WAL, so a server that is up but cannot write fails it too.
 */
export async function probePostgres(connectionString: string, applicationName: string): Promise<void> {
  const client = new pg.Client({
    connectionString,
    application_name: applicationName,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    query_timeout: PROBE_TIMEOUT_MS,
  });
  // A connection dropped after the probe must not raise an unhandled 'error'.
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT txid_current()");
  } finally {
    await client.end().catch(() => undefined);
  }
}
