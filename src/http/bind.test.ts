// The HTTP bind address: loopback by default, HOST outside dev, error details only to loopback clients.
import { networkInterfaces } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { resolveConfig as resolveAppConfig, type OkeConfig } from "../app/config.ts";
import type { App, Env } from "../app/types.ts";
import { createApp, flow, http, on } from "../index.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

// Where the app listens by default, and who sees error internals in dev.

/** This machine's first non-loopback IPv4 address: a peer that is not loopback, without a second machine. */
function lanAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  throw new Error("bind.test: this machine has no non-loopback IPv4 address to test from");
}

let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

const crashApp = (env: "dev" | "prod"): App =>
  createApp({
    env,
    store: createMemoryStore(),
    logger: createLogger({ format: "silent" }),
    config: { drivers: { send: "memory" } },
    modules: [
      {
        exports: {
          crash: on(
            http.get("/crash"),
            flow("crash", {
              do: () => {
                throw new Error("secret at /srv/app/src/db.ts");
              },
            }),
          ),
        },
      },
    ],
  });

describe("bind address", () => {
  it("defaults to loopback; HOST counts outside dev only; http.host wins", () => {
    const resolveConfig = (c: OkeConfig, env: Env, vars: NodeJS.ProcessEnv) =>
      resolveAppConfig({ ...c, drivers: { journal: "memory" } }, env, vars);
    expect(resolveConfig({}, "dev", {}).host).toBe("127.0.0.1");
    expect(resolveConfig({}, "dev", { HOST: "0.0.0.0" }).host).toBe("127.0.0.1");
    expect(resolveConfig({}, "prod", {}).host).toBe("127.0.0.1");
    expect(resolveConfig({}, "prod", { HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(resolveConfig({}, "test", { HOST: "::" }).host).toBe("::");
    expect(resolveConfig({ http: { host: "10.0.0.5" } }, "prod", { HOST: "0.0.0.0" }).host).toBe("10.0.0.5");
    expect(resolveConfig({ env: { dev: { http: { host: "0.0.0.0" } } } }, "dev", {}).host).toBe("0.0.0.0");
  });

  it("app.start() in dev listens on loopback only and reports the bound address", async () => {
    app = crashApp("dev");
    const bound = await app.start({ port: 0 });
    expect(bound.host).toBe("127.0.0.1");
    expect((await fetch(`http://127.0.0.1:${bound.port}/_/health`)).status).toBe(200);
    await expect(fetch(`http://${lanAddress()}:${bound.port}/_/health`)).rejects.toThrow();
  });

  it("dev shows error details to loopback clients only", async () => {
    app = crashApp("dev");
    const { port, host } = await app.start({ port: 0, host: "0.0.0.0" });
    expect(host).toBe("0.0.0.0");
    const local = await fetch(`http://127.0.0.1:${port}/crash`);
    const localBody = (await local.json()) as { error: { details?: { message?: string } } };
    expect(localBody.error.details?.message).toBe("secret at /srv/app/src/db.ts");
    const remote = await fetch(`http://${lanAddress()}:${port}/crash`);
    expect(remote.status).toBe(500);
    const text = await remote.text();
    expect(JSON.parse(text)).toEqual({ ok: false, error: { code: "OKE1500", message: "Internal error" } });
    expect(text).not.toContain("/srv/app");
    // In-process requests are local: the test or script calling app.request() is this process.
    const inProcess = (await (await app.request("/crash")).json()) as { error: { details?: unknown } };
    expect(inProcess.error.details).toBeDefined();
  });
});
