/** A store.db damaged under a running app: the first call that meets the damage stops the store with OKE1328 (not a disk outage that "recovers" and fails again), and it stays stopped. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { OkeError } from "../../errors.ts";
import { createFileStore, type FileStore } from "./file-store.ts";

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
const open: FileStore[] = [];
afterEach(async () => {
  while (open.length > 0)
    await open
      .pop()!
      .close()
      .catch(() => undefined);
  while (dirs.length > 0) await rm(dirs.pop()!, { recursive: true, force: true });
});

const codeOf = (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => undefined,
    (e: unknown) => (e instanceof OkeError ? e.code : `not an OkeError: ${String(e)}`),
  );

describe("a file store whose store.db is damaged", () => {
  it("answers OKE1328 naming the damage and oke doctor at the first call that meets it, then refuses every call, also after its probes", async () => {
    const project = await mkdtemp(join(tmpdir(), "oke-malformed-"));
    dirs.push(project);
    const dir = join(project, ".oke");
    const s0 = createFileStore({ dir });
    await s0.open();
    for (let i = 0; i < 300; i++)
      await s0.enqueue(
        [{ id: `m${i}`, signal: "sig.a", key: null, payload: { pad: "p".repeat(300) }, parentRunId: null }],
        T0,
      );
    await s0.close();
    // Garbage over the second half of the file: the messages' b-trees no longer check out.
    const db = join(dir, "store.db");
    const buf = await readFile(db);
    buf.fill(0x5a, Math.floor(buf.length / 4096 / 2) * 4096, buf.length);
    await writeFile(db, buf);

    const s = createFileStore({ dir });
    open.push(s);
    await s.open();
    // Reading every message meets the damaged pages.
    const first = await s.pageMessages({ signal: "sig.a", status: "pending", limit: 500 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(first).toBeInstanceOf(OkeError);
    const e = first as OkeError;
    expect(e.code).toBe("OKE1328");
    expect(e.message).toMatch(
      new RegExp(
        `^File store "${dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}": SQLite found store\\.db damaged while the app used it \\(`,
      ),
    );
    expect(e.fix).toContain(`oke doctor ${dir}`);
    // Every call now, reads and writes alike: the same answer, not a retry that meets the damage later.
    expect(await codeOf(s.stats("sig.a", T0))).toBe("OKE1328");
    expect(
      await codeOf(s.enqueue([{ id: "x", signal: "sig.b", key: null, payload: {}, parentRunId: null }], T0)),
    ).toBe("OKE1328");
    // Its health probe does not reopen it.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await codeOf(s.getMessage("m1"))).toBe("OKE1328");
  });
});
