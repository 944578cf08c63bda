/** Errors of the postgres driver (OKE133x), and the mapping of unique violations. */
import type pg from "pg";
import { OkeError } from "../../errors.ts";
import { okengineVersion } from "../../okengine-version.ts";
import { storeErrors } from "../index.ts";

/** Errors of the postgres driver (OKE133x). Codes are stable. */
export const postgresStoreErrors = {
  badTx: () =>
    new OkeError({
      code: "OKE1330",
      message: "enqueue({ tx }) needs a pg client (Pool client or Client) inside an open transaction.",
      fix: "Pass the client you called BEGIN on: `const c = await pool.connect(); await c.query('BEGIN'); await store.enqueue(msgs, now, { tx: c })`.",
    }),
  closed: (schema: string) =>
    new OkeError({
      code: "OKE1331",
      message: `Postgres store (schema ${schema}) is closed.`,
      fix: "Do not use a store after close(); create a new one.",
      details: { schema },
    }),
  newerSchema: (
    schema: string,
    dbVersion: number,
    codeVersion: number,
    needs: number,
    appliedBy: string | undefined,
  ) =>
    new OkeError({
      code: "OKE1332",
      message:
        `Postgres schema ${schema} is at migration ${dbVersion}${appliedBy === undefined ? "" : ` (applied by okengine ${appliedBy})`} ` +
        `but this okengine (${okengineVersion()}) knows only ${codeVersion}.`,
      fix:
        `Run ${appliedBy === undefined ? `an okengine that knows migration ${needs} or later` : `okengine ${appliedBy} or later`} on this process (the schema's migrations ` +
        `after ${codeVersion} need it: they do not leave older code working), or point it at another schema.`,
      details: { schema, dbVersion, codeVersion, needs, ...(appliedBy === undefined ? {} : { appliedBy }) },
    }),
  olderCodeLive: (
    schema: string,
    migration: number,
    name: string,
    needs: number,
    older: ReadonlyArray<{ id: string; host: string; pid: number; okengine: string; knows: number }>,
  ) =>
    new OkeError({
      code: "OKE1335",
      message:
        `Postgres schema ${schema}: migration ${migration} (${name}) leaves working only code that knows migration ${needs} or later, ` +
        `but ${older.length === 1 ? "a live instance runs" : `${older.length} live instances run`} older code: ` +
        older
          .slice(0, 5)
          .map((i) => `${i.host} pid ${i.pid} (okengine ${i.okengine}, knows ${i.knows})`)
          .join(", ") +
        `${older.length > 5 ? `, and ${older.length - 5} more` : ""}. Nothing was migrated.`,
      fix:
        "Their code is older than this migration can run beside, so this upgrade is not a rolling deploy (an upgrade " +
        "across several releases asks for the newest code any of its migrations needs): stop the instances running the " +
        "older code first, then boot this version (an instance that stopped without a clean stop counts as live for 30 s " +
        "after its last heartbeat). Until then they go on as they were.",
      details: { schema, migration, needs, instances: older },
    }),
  badSchemaName: (schema: string) =>
    new OkeError({
      code: "OKE1333",
      message: `Invalid postgres schema name "${schema}".`,
      fix: "Use letters, digits and underscores, starting with a letter or underscore (at most 48 characters).",
      details: { schema },
    }),
} as const;

/** Unique violations name the row: turn them into the contract's errors (the memory driver's). */
export function mapConflict(err: unknown, runId?: string): unknown {
  const e = err as Partial<pg.DatabaseError> | undefined;
  if (e?.code !== "23505") return err;
  const key = /\)=\((.*)\) already exists/.exec(e.detail ?? "")?.[1];
  if (e.constraint === "journal_entries_pkey" && runId !== undefined) {
    return storeErrors.duplicateSeq(runId, Number(key?.split(", ").at(-1)));
  }
  if (e.constraint === "messages_pkey" && key !== undefined) return storeErrors.duplicateMessage(key);
  return err;
}
