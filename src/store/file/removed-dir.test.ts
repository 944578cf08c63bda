/** The store directory removed (or its database replaced) under a running app: emits fail with OKE1325, /_/ready says store_unavailable and stays so; nothing is acknowledged into the removed file. */
import { mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../app/app.ts";
import { OkeError } from "../../errors.ts";
import { flow } from "../../flow/flow.ts";
import { on } from "../../flow/on.ts";
import { createLogger } from "../../log/logger.ts";
import { signal } from "../../signal/signal.ts";
import { createFileStore } from "./file-store.ts";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

async function bootOn(dir: string) {
  const store = createFileStore({ dir });
  const jobs = signal.once("gone.jobs", { optional: true });
  const w = on(jobs, flow("gone.jobs", { do: () => undefined }));
  const app = createApp({ modules: [{ w }], env: "test", store, logger: createLogger({ format: "silent" }) });
  await app.boot();
  const emit = async (n: number): Promise<unknown> => {
    try {
      await app.emit(jobs, { n });
      return undefined;
    } catch (e) {
      return e;
    }
  };
  return { app, store, emit };
}

describe("file store whose directory is removed under the app", () => {
  it.each([
    ["the directory removed", (dir: string) => rmSync(dir, { recursive: true, force: true })],
    ["the directory moved aside", (dir: string) => renameSync(dir, `${dir}.moved`)],
  ])("%s: the next emit fails with OKE1325 and readiness stays 503", async (_, remove) => {
    const root = mkdtempSync(join(tmpdir(), "oke-gone-"));
    roots.push(root);
    const dir = join(root, ".oke");
    const { app, emit } = await bootOn(dir);
    for (let n = 0; n < 5; n++) expect(await emit(n)).toBeUndefined();
    remove(dir);
    const failure = await emit(5);
    expect(failure).toBeInstanceOf(OkeError);
    expect(failure).toMatchObject({
      code: "OKE1325",
      message: `File store "${dir}": store.db was removed or replaced while the app had it open; it refuses every call, and nothing written since was acknowledged.`,
    });
    const ready = await app.request("/_/ready");
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toBe("store_unavailable");
    // It does not "recover" into a fresh, empty store under the same name.
    expect(await emit(6)).toMatchObject({ code: "OKE1325" });
    expect((await app.request("/_/ready")).status).toBe(503);
    await app.stop({ timeoutMs: 2_000 });
  });
});
