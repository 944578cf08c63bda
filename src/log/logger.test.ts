// The err serializer of okengine's loggers: an error's own data, never the objects a library hangs on it.
import pg from "pg";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { errorForLog, errSerializer } from "./logger.ts";

/** What a pino logger with this serializer writes for `{ err }`. */
function logged(err: unknown): Record<string, unknown> {
  const lines: string[] = [];
  const logger = pino({ serializers: { err: errSerializer } }, { write: (l: string) => void lines.push(l) });
  logger.warn({ err }, "x");
  return (JSON.parse(lines[0]!) as { err: Record<string, unknown> }).err;
}

describe("errSerializer", () => {
  it("leaves out a pg.Client hung on the error (pg-pool's idle error) and keeps code, message and stack", () => {
    const err = Object.assign(new Error("terminating connection due to administrator command"), {
      code: "57P01",
      severity: "FATAL",
      client: new pg.Client({ connectionString: "postgres://u:secret@127.0.0.1:1/db" }),
    });
    const out = logged(err);
    expect(out).not.toHaveProperty("client");
    expect(out).toMatchObject({ type: "Error", code: "57P01", severity: "FATAL" });
    expect(out.message).toBe("terminating connection due to administrator command");
    expect(out.stack).toContain("logger.test.ts");
    expect(JSON.stringify(out)).not.toContain("secret");
    // The error itself is untouched.
    expect(err.client).toBeInstanceOf(pg.Client);
  });

  it("keeps an OkeError's fields and plain details, and a cause's message", () => {
    const err = new OkeError({
      code: "OKE1096",
      message: "could not reach",
      fix: "check",
      details: { address: "h:5432", tries: [1, 2] },
      cause: Object.assign(new Error("ECONNREFUSED"), { client: new pg.Client() }),
    });
    const out = logged(err);
    expect(out).toMatchObject({
      type: "OkeError",
      code: "OKE1096",
      fix: "check",
      details: { address: "h:5432", tries: [1, 2] },
    });
    expect(out.message).toBe("could not reach: ECONNREFUSED");
    expect(JSON.stringify(out)).not.toContain('"client"');
  });

  it("returns anything that is not an Error as it is", () => {
    expect(errorForLog("boom")).toBe("boom");
    expect(logged({ some: "thing" })).toEqual({ some: "thing" });
  });
});
