// Error bodies in production: a 5xx answers its code only, never store directories, schemas or hosts; a store outage is a 503.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { App, Env } from "../app/types.ts";
import { channel, createApp, flow, http, on, signal, OkeError } from "../index.ts";
import { createLogger } from "../log/logger.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { fileStoreErrors } from "../store/file/file-errors.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";

// Production error bodies carry a code and, for 5xx, nothing else: no paths, hosts or internals.

const temps: string[] = [];
let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

const hook = channel("hooks.out", { url: "http://127.0.0.1:1/secret-internal-hook", timeoutMs: 2_000 });
const task = signal.once("tasks.any");

function make(env: Env): { app: App; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "oke-errors-secret-"));
  temps.push(dir);
  const a = createApp({
    env,
    store: createFileStore({ dir }),
    logger: createLogger({ format: "silent" }),
    config: { drivers: { send: "webhook", journal: "file" } },
    modules: [
      {
        exports: {
          task,
          worker: on(task, flow("tasks.worker", { do: () => undefined })),
          emit: on(http.post("/emit"), flow("emit", { do: async (_, fx) => fx.emit(task, { a: 1 }) })),
          persist: on(
            http.get("/persist"),
            flow("persist", {
              do: () => {
                throw fileStoreErrors.failed(dir, new Error(`ENOSPC: no space left, write '${dir}/log'`));
              },
            }),
          ),
          webhook: on(
            http.post("/webhook"),
            flow("webhook", { do: async (_, fx) => fx.send(hook, { x: 1 }) }),
          ),
          retry: on(
            http.get("/retry"),
            flow("retry", {
              do: () => {
                throw new OkeError({
                  code: "APP503",
                  status: 503,
                  message: "Busy, retry in 5 s",
                  expose: true,
                });
              },
            }),
          ),
          paid: on(
            http.get("/paid"),
            flow("paid", {
              do: () => {
                throw new OkeError({
                  code: "APP409",
                  status: 409,
                  message: "Already paid",
                  details: { id: 1 },
                });
              },
            }),
          ),
        },
      },
    ],
  });
  app = a;
  return { app: a, dir };
}

const body = async (res: Response) =>
  JSON.parse(await res.text()) as { ok: false; error: Record<string, unknown> };

describe("error bodies in production", () => {
  it("OKE1321 (the store could not persist) answers its code only, never the store directory", async () => {
    const { app: a, dir } = make("prod");
    const res = await a.request("/persist");
    expect(res.status).toBe(500);
    const text = await res.clone().text();
    expect(await body(res)).toEqual({ ok: false, error: { code: "OKE1321", message: "Internal error" } });
    expect(text).not.toContain(dir);
    expect(text).not.toContain("ENOSPC");
  });

  it("a real store error (a closed file store) and a failed webhook say nothing about paths or hosts", async () => {
    const { app: a, dir } = make("prod");
    const { port } = await a.start({ port: 0, host: "127.0.0.1" });
    const webhook = await fetch(`http://127.0.0.1:${port}/webhook`, { method: "POST" });
    expect(webhook.status).toBe(500);
    const wText = await webhook.text();
    expect(JSON.parse(wText)).toEqual({ ok: false, error: { code: "OKE1271", message: "Internal error" } });
    expect(wText).not.toContain("127.0.0.1:1");
    await a.store.close();
    const closed = await fetch(`http://127.0.0.1:${port}/emit`, { method: "POST" });
    expect(closed.status).toBe(500);
    const cText = await closed.text();
    expect(JSON.parse(cText)).toEqual({ ok: false, error: { code: "OKE1322", message: "Internal error" } });
    expect(cText).not.toContain(dir);
  });

  it("keeps the text of 4xx errors and of a 5xx made with expose: true", async () => {
    const { app: a } = make("prod");
    expect(await body(await a.request("/paid"))).toEqual({
      ok: false,
      error: { code: "APP409", message: "Already paid", details: { id: 1 } },
    });
    const retry = await a.request("/retry");
    expect(retry.status).toBe(503);
    expect(await body(retry)).toEqual({
      ok: false,
      error: { code: "APP503", message: "Busy, retry in 5 s" },
    });
  });

  it("outside prod (tests read the documented texts) an OkeError answers its own message", async () => {
    const { app: a, dir } = make("test");
    const res = await body(await a.request("/persist"));
    expect(res.error.code).toBe("OKE1321");
    expect(res.error.message).toBe(
      `File store "${dir}" could not persist a write; it refuses calls until its disk accepts writes again.`,
    );
  });
});

describe("a store outage the store knows about", () => {
  /** A memory store that is down (its health says so) and refuses emits as a lost database does. */
  function outageApp(logger = createLogger({ format: "silent" })) {
    const inner = createMemoryStore();
    const store = Object.create(inner) as Store;
    let down = false;
    store.health = () => (down ? { ok: false, since: 1, reason: "refused" } : { ok: true });
    store.isUnavailable = (e) => (e as { code?: unknown }).code === "ECONNREFUSED";
    store.enqueue = (m, now, o) =>
      down
        ? Promise.reject(
            Object.assign(new Error("connect ECONNREFUSED 10.0.0.9:5432"), { code: "ECONNREFUSED" }),
          )
        : inner.enqueue(m, now, o);
    const a = createApp({
      env: "prod",
      store,
      config: { drivers: { journal: "memory" } },
      logger,
      modules: [
        {
          exports: {
            task,
            worker: on(task, flow("tasks.worker", { do: () => undefined })),
            emit: on(http.post("/emit"), flow("emit", { do: async (_, fx) => fx.emit(task, { a: 1 }) })),
            bug: on(
              http.get("/bug"),
              flow("bug", {
                do: () => {
                  throw new TypeError("x is not a function");
                },
              }),
            ),
          },
        },
      ],
    });
    app = a;
    return { app: a, goDown: () => (down = true) };
  }

  it("answers 503 OKE1504 with Retry-After, not 500 OKE1500 (over HTTP and app.request)", async () => {
    const { app: a, goDown } = outageApp();
    const { port } = await a.start({ port: 0, host: "127.0.0.1" });
    goDown();
    const expected = {
      ok: false,
      error: {
        code: "OKE1504",
        message: "The store is unavailable; try again shortly.",
        fix: "Retry after the Retry-After delay; /_/ready reports store_unavailable until the store is back.",
      },
    };
    const res = await fetch(`http://127.0.0.1:${port}/emit`, { method: "POST" });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("2");
    const text = await res.text();
    expect(JSON.parse(text)).toEqual(expected);
    expect(text).not.toContain("10.0.0.9");
    const inProcess = await a.request("/emit", { method: "POST" });
    expect(inProcess.status).toBe(503);
    expect(inProcess.headers.get("retry-after")).toBe("2");
    expect(await inProcess.json()).toEqual(expected);
  });

  it("logs the outage's 503s once at warn, without a stack, and the rest at debug", async () => {
    const lines: Array<{ level: number; msg: string; stack?: unknown; err?: unknown }> = [];
    const { app: a, goDown } = outageApp(
      pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
    );
    goDown();
    for (let i = 0; i < 5; i++) expect((await a.request("/emit", { method: "POST" })).status).toBe(503);
    const refused = lines.filter((l) => l.msg === "http 503 POST /emit: the store is unavailable");
    expect(refused.map((l) => l.level)).toEqual([40, 20, 20, 20, 20]);
    expect(refused.every((l) => l.err === undefined && l.stack === undefined)).toBe(true);
  });

  it("an error that is not the outage is still a 500 while the store is down", async () => {
    const { app: a, goDown } = outageApp();
    goDown();
    const res = await a.request("/bug");
    expect(res.status).toBe(500);
    expect(res.headers.get("retry-after")).toBeNull();
    expect(await body(res)).toEqual({ ok: false, error: { code: "OKE1500", message: "Internal error" } });
  });
});
