// A process that boots while PostgreSQL is down waits for it (database.connectTimeoutMs) instead of exiting; a wrong port fails with the address named.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createApp, flow, http, on } from "../../src/index.ts";
import { freePort } from "../support/free-port.ts";
import { usePrivateCluster } from "./private-cluster.ts";

const cluster = usePrivateCluster();

const capture = () => {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, warns: () => lines.filter((l) => l.level === 40) };
};

const ping = on(http.get("/ping"), flow("ping", { do: () => ({ ok: true }) }));

describe("boot during a PostgreSQL outage", () => {
  it("an app booting while its cluster is down becomes ready once the cluster starts", async () => {
    await cluster.stop();
    const { logger, warns } = capture();
    const app = createApp({
      modules: [{ ping }],
      env: "prod",
      logger,
      config: {
        drivers: { journal: "postgres", send: "memory" },
        database: { url: cluster.url, schema: "boot_wait", connectTimeoutMs: 60_000 },
        console: { port: false },
      },
    });
    try {
      const booted = app.boot();
      const outcome = booted.then(
        () => "booted",
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 1_200));
      expect(app.readiness()).toEqual({ ready: false, reason: "store_unavailable" });
      await cluster.start();
      expect(await outcome).toBe("booted");
      expect(app.readiness()).toEqual({ ready: true });
      const w = warns().filter((l) => typeof l.attempt === "number");
      expect(w.length).toBeGreaterThanOrEqual(1);
      const port = new URL(cluster.url).port;
      expect(w[0]?.msg).toContain(`the store at 127.0.0.1:${port}/postgres is unavailable`);
      expect(w[0]?.msg).not.toContain("postgres@");
      expect((await app.request("/ping")).status).toBe(200);
    } finally {
      await app.stop({ timeoutMs: 2_000 });
    }
  }, 60_000);

  it("a closed port fails after the bound with an error naming the address and the setting", async () => {
    const port = await freePort();
    const app = createApp({
      modules: [{ ping }],
      env: "prod",
      logger: capture().logger,
      config: {
        drivers: { journal: "postgres", send: "memory" },
        database: {
          url: `postgres://postgres:secret@127.0.0.1:${port}/app`,
          schema: "boot_wait",
          connectTimeoutMs: 300,
        },
        console: { port: false },
      },
    });
    const err = await app.boot().then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; fix?: string },
    );
    expect(err?.code).toBe("OKE1096");
    expect(err?.message).toContain(`could not reach the store at 127.0.0.1:${port}/app in 300 ms`);
    expect(err?.message).toContain("ECONNREFUSED");
    expect(err?.message).not.toContain("secret");
    expect(err?.fix).toContain("DATABASE_URL");
    expect(err?.fix).toContain("database.connectTimeoutMs");
    await app.stop({ timeoutMs: 1_000 });
  });
});
