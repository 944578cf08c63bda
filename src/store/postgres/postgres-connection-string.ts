/** Checks a PostgreSQL connection string before any connect: a malformed one fails at once (OKE1098), its password never shown. */
import { OkeError } from "../../errors.ts";

/** The form a connection string takes, shown whenever one cannot be used. */
export const POSTGRES_URL_FORM = "postgres://user:password@host:5432/db";

/**
 * What is wrong with `connectionString`, or `undefined` when pg can use it. pg reads a string with no
 * scheme as a path relative to `postgres://base` and dials the host "base", so without this check a
 * missing `postgres://` costs the whole boot wait (30 s of retries) and ends in a misleading
 * "getaddrinfo ENOTFOUND base".
 */
export function connectionStringProblem(connectionString: string): string | undefined {
  const s = connectionString;
  if (s.trim() === "") return "it is empty";
  if (s !== s.trim()) return "it has spaces or a line break at its start or end";
  // pg's other two forms: a socket directory ("/var/run/postgresql mydb") and socket:/dir?db=mydb.
  if (s.startsWith("/") || /^socket:/i.test(s)) return undefined;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(s)?.[1];
  if (scheme === undefined) return "it does not start with postgres://";
  if (!/^postgres(ql)?$/i.test(scheme))
    return `its scheme is ${scheme}://, not postgres:// (or postgresql://)`;
  if (!parses(s) && !parses(s.replace("@/", "@host/")))
    return "it is not a valid URL: check that the port is a number and that @ : / ? # in the user name or password are percent-encoded (@ is %40)";
  return undefined;
}

/** `new URL` as pg uses it; pg also retries an empty host (`user@/db?host=…`), hence the second try above. */
function parses(s: string): boolean {
  try {
    new URL(s);
    return true;
  } catch {
    return false;
  }
}

/**
 * `connectionString` as it may be shown: the user and password before the last `@` become `***`,
 * as does a `password=` parameter and a `user:password` written without its `@host`.
 */
export function redactConnectionString(connectionString: string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(connectionString)?.[0] ?? "";
  let rest = connectionString.slice(scheme.length);
  const at = rest.lastIndexOf("@");
  if (at >= 0) rest = `***@${rest.slice(at + 1)}`;
  // No "@": what follows a colon in the first part is a port, or else a password missing its host.
  else
    rest = rest.replace(/^([^/?#:]*):([^/?#]*)/, (all, user: string, after: string) =>
      /^\d*$/.test(after) ? all : `${user}:***`,
    );
  return scheme + rest.replace(/([?&]password=)[^&#]*/gi, "$1***");
}

/**
 * Throws OKE1098 when `connectionString` cannot be used. `subject` says where it came from, as the
 * user wrote it: `oke boot: DATABASE_URL`, `oke boot: database.url`, `createPostgresStore(): connectionString`.
 */
export function checkConnectionString(connectionString: string, subject: string): void {
  const problem = connectionStringProblem(connectionString);
  if (problem === undefined) return;
  const shown = redactConnectionString(connectionString);
  throw new OkeError({
    code: "OKE1098",
    message: `${subject} is not a PostgreSQL URL: ${problem} (${JSON.stringify(shown)})`,
    fix: `Write it as ${POSTGRES_URL_FORM}.`,
    details: { problem, given: shown },
  });
}
