/** A full disk under the file driver (a 16 MiB tmpfs: room for SQLite's WAL, ~4 MiB before its automatic checkpoint): emits fail clearly, /_/ready says store_unavailable, and the store resumes by itself once space is back. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { open, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test/conformance/app-fixture.ts";
import { createApp } from "../../app/app.ts";
import { OkeError } from "../../errors.ts";
import { flow } from "../../flow/flow.ts";
import { on } from "../../flow/on.ts";
import { createLogger } from "../../log/logger.ts";
import { signal } from "../../signal/signal.ts";
import { createFileStore } from "./file-store.ts";

let mountPoint = "";

beforeAll(() => {
  mountPoint = mkdtempSync(join(tmpdir(), "oke-enospc-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", mountPoint], { stdio: "pipe" });
  } catch (e) {
    rmSync(mountPoint, { recursive: true, force: true });
    // Not skipped: without a small filesystem to fill, this behaviour is untested.
    throw new Error(`disk-full test needs root to mount a 16 MiB tmpfs at ${mountPoint}: ${String(e)}`);
  }
});

afterAll(() => {
  if (!mountPoint) return;
  execFileSync("umount", [mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

/** Fills the filesystem with one file until ENOSPC; returns its path. */
async function fill(dir: string): Promise<string> {
  const path = join(dir, "filler");
  const f = await open(path, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) {
      try {
        await f.write(chunk);
      } catch (e) {
        if ((e as { code?: string }).code === "ENOSPC") break;
        throw e;
      }
    }
    // Whatever partial chunk still fits, so not a page is left.
    for (;;) {
      try {
        await f.write(Buffer.alloc(512, 1));
      } catch {
        break;
      }
    }
  } finally {
    await f.close();
  }
  return path;
}

describe("file store on a full disk", () => {
  it("fails emits with OKE1321 and /_/ready 503 while full, recovers by itself once space is freed, loses nothing acknowledged", async () => {
    const dir = join(mountPoint, ".oke");
    const store = createFileStore({ dir });
    const jobs = signal.once("disk.jobs", { optional: true });
    const w = on(jobs, flow("disk.jobs", { do: () => undefined }));
    const app = createApp({
      modules: [{ w }],
      env: "test",
      store,
      logger: createLogger({ format: "silent" }),
    });
    const acknowledged: number[] = [];
    const emit = async (n: number): Promise<unknown> => {
      try {
        await app.emit(jobs, { n, pad: "x".repeat(200) });
        acknowledged.push(n);
        return undefined;
      } catch (e) {
        return e;
      }
    };
    await app.boot();
    for (let n = 0; n < 50; n++) expect(await emit(n)).toBeUndefined();
    expect((await app.request("/_/ready")).status).toBe(200);

    const filler = await fill(mountPoint);
    let n = 50;
    let failure: unknown;
    while (failure === undefined && n < 10_000) failure = await emit(n++);
    expect(failure, "an emit fails once the disk is full").toBeInstanceOf(OkeError);
    expect((failure as OkeError).code).toBe("OKE1321");
    expect((failure as OkeError).message).toBe(
      `File store "${dir}" could not persist a write; it refuses calls until its disk accepts writes again.`,
    );
    const ready = await app.request("/_/ready");
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toBe("store_unavailable");
    expect((await app.request("/_/health")).status).toBe(200);
    // Still full: still refused, never half-written.
    expect(await emit(n++)).toBeInstanceOf(OkeError);

    await unlink(filler);
    await until(
      async () => (await app.request("/_/ready")).status === 200,
      "ready again once space is back",
      20_000,
    );
    const afterFull = n;
    for (let i = 0; i < 20; i++) expect(await emit(n++)).toBeUndefined();
    await app.stop({ timeoutMs: 2_000 });
    await store.close();

    const reopened = createFileStore({ dir });
    await reopened.open();
    try {
      const onDisk = new Set<number>();
      for (const status of ["pending", "inflight", "delivered"] as const) {
        let cursor: string | null = null;
        do {
          const page = await reopened.pageMessages({ signal: "disk.jobs", status, cursor, limit: 500 });
          for (const m of page.items) onDisk.add((m.payload as { n: number }).n);
          cursor = page.next;
        } while (cursor !== null);
      }
      const missing = acknowledged.filter((k) => !onDisk.has(k));
      expect(missing, "every acknowledged emit is on disk").toEqual([]);
      expect(acknowledged.filter((k) => k >= afterFull)).toHaveLength(20);
      console.log(
        `disk full: ${acknowledged.length} acknowledged (${afterFull - 50 - 2} more before ENOSPC), all present after reopen`,
      );
    } finally {
      await reopened.close();
    }
  });

  it("an Idempotency-Key claim acknowledged before its commit failed is logged with its key, never lost silently", async () => {
    const dir = join(mountPoint, ".oke-idem");
    const logged: Array<{ key?: unknown; msg: string }> = [];
    const record = (o: object, msg?: string): void => void logged.push({ ...o, msg: msg ?? "" });
    const store = createFileStore({ dir, logger: { info: record, warn: record, error: record } });
    await store.open();
    const claim = (n: number) =>
      store.claimIdempotencyKey({
        key: `key-${n}`,
        fingerprint: "f".repeat(200),
        runId: `run-${n}`,
        now: 1,
        lockMs: 30_000,
        windowMs: 3_600_000,
      });
    for (let n = 0; n < 20; n++) await claim(n);
    const acknowledged: string[] = [];
    const filler = await fill(mountPoint);
    let refused: unknown;
    // Claims resolve before their commit: keep claiming (a turn apart) until one is refused.
    for (let n = 20; refused === undefined && n < 10_000; n++) {
      try {
        await claim(n);
        acknowledged.push(`key-${n}`);
      } catch (e) {
        refused = e;
      }
      await new Promise((r) => setImmediate(r));
    }
    expect(refused).toBeInstanceOf(OkeError);
    await unlink(filler);
    await until(
      async () => {
        try {
          await claim(100_000);
          return true;
        } catch {
          return false;
        }
      },
      "claims accepted again once space is back",
      20_000,
    );
    await store.close();
    const reopened = createFileStore({ dir });
    await reopened.open();
    try {
      const lost: string[] = [];
      for (const key of acknowledged)
        if ((await reopened.getIdempotencyKey(key)) === undefined) lost.push(key);
      const reported = new Set(
        logged.filter((l) => l.msg.includes("its commit failed")).map((l) => l.key as string),
      );
      expect(
        lost.filter((k) => !reported.has(k)),
        "every lost claim was reported",
      ).toEqual([]);
      console.log(`disk full: ${acknowledged.length} claims acknowledged, ${lost.length} lost, all reported`);
    } finally {
      await reopened.close();
    }
  });
});
