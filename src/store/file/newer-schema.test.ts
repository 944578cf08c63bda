/** A file store migrated by a newer okengine: refused with OKE1326 naming the version (not "cannot be recovered"), unless its migrations leave this code working; `oke doctor` says so. */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { OkeError } from "../../errors.ts";
import { okengineVersion } from "../../okengine-version.ts";
import { createFileStore } from "./file-store.ts";
import { sqliteMigrations } from "./sqlite/migrations/index.ts";

const BIN = fileURLToPath(new URL("../../../bin/oke.js", import.meta.url));
const run = promisify(execFile);
const T0 = 1_700_000_000_000;
const LATEST = Math.max(...sqliteMigrations.map((m) => m.id));
const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length > 0) await rm(dirs.pop()!, { recursive: true, force: true });
});

/** A project whose store holds one message, then a migration this code does not know, as a newer okengine records it. */
async function migratedByNewer(runsWith: number): Promise<{ project: string; dir: string }> {
  const project = await mkdtemp(join(tmpdir(), "oke-newer-"));
  dirs.push(project);
  const dir = join(project, ".oke");
  const s = createFileStore({ dir });
  await s.open();
  await s.enqueue([{ id: "m1", signal: "sig.a", key: null, payload: { n: 1 }, parentRunId: null }], T0);
  await s.close();
  const db = new Database(join(dir, "store.db"));
  db.prepare(
    "INSERT INTO schema_migrations (id, name, applied_at, runs_with, okengine) VALUES (?, 'future', ?, ?, '9.9.0')",
  ).run(LATEST + 1, T0, runsWith);
  db.close();
  return { project, dir };
}

describe("a file store migrated by a newer okengine", () => {
  it("records who applied each migration and the oldest code it leaves working", async () => {
    const project = await mkdtemp(join(tmpdir(), "oke-newer-"));
    dirs.push(project);
    const s = createFileStore({ dir: join(project, ".oke") });
    await s.open();
    await s.close();
    const db = new Database(join(project, ".oke", "store.db"), { readonly: true });
    const rows = db.prepare("SELECT id, runs_with, okengine FROM schema_migrations ORDER BY id").all();
    db.close();
    expect(rows).toEqual(
      sqliteMigrations.map((m) => ({ id: m.id, runs_with: m.runsWith ?? m.id, okengine: okengineVersion() })),
    );
  });

  it("is refused with OKE1326 naming the version that migrated it, and left as it is", async () => {
    const { dir } = await migratedByNewer(LATEST + 1);
    const before = await readFile(join(dir, "store.db"));
    const err = await createFileStore({ dir })
      .open()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OkeError);
    expect(err).toMatchObject({
      code: "OKE1326",
      message: `File store "${dir}" was migrated by a newer okengine: its schema is at migration ${LATEST + 1} (applied by okengine 9.9.0), and this okengine knows only ${LATEST}. Nothing in it is damaged.`,
    });
    expect((err as OkeError).fix).toContain("Run okengine 9.9.0 or later on this store");
    expect((err as OkeError).fix).not.toContain("start empty.");
    expect(await readFile(join(dir, "store.db"))).toEqual(before);
  });

  it("opens when the newer migrations leave this code working (runs_with), and its data is there", async () => {
    const { dir } = await migratedByNewer(LATEST);
    const s = createFileStore({ dir });
    await s.open();
    expect((await s.getMessage("m1"))?.payload).toEqual({ n: 1 });
    await s.close();
  });

  it("oke doctor: intact, and says this version refuses to open it and which one does", async () => {
    const { project, dir } = await migratedByNewer(LATEST + 1);
    const out = await run(process.execPath, [BIN, "doctor", project]);
    expect(out.stdout).toBe(
      `oke doctor: ${join(dir, "store.db")} is intact (SQLite quick_check)\n` +
        `Its schema is at migration ${LATEST + 1} (applied by okengine 9.9.0), newer than this okengine (${okengineVersion()}) knows (${LATEST}): ` +
        `this version refuses to open it (OKE1326). Run okengine 9.9.0 or later on it.\n`,
    );
  });
});
