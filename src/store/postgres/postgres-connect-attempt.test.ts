// A connect to a server that accepts TCP and never answers ends at connectAttemptTimeoutMs: open() fails as an outage, boot retries, stop() returns.
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createApp, flow, http, on } from "../../index.ts";
import { isPostgresOutage } from "./postgres-health.ts";
import { createPostgresStore } from "./postgres-store.ts";

/**
 * How long the test waits for stop() before it closes the held sockets itself and fails: 100× the
 * 200 ms attempt bound the cases use. Nothing here races a clock: without a bound on the attempt
 * the connect never ends (the server never answers and never closes), so stop() cannot resolve
 * before this guard, however fast the machine; with it stop() resolves on its own, first.
 */
const GUARD_MS = 20_000;
const ATTEMPT_MS = 200;

interface SilentServer {
  url: string;
  /** Connections accepted so far. */
  accepted: () => number;
  /** Accepted connections the client closed (the test never closes one before cleanup). */
  closedByClient: () => number;
  /** Resolves when the client has closed every connection accepted so far. */
  allClosedByClient: () => Promise<void>;
  /** Resolves when the n-th connection is accepted. */
  connection: (n: number) => Promise<void>;
  close: () => Promise<void>;
}

const servers: SilentServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A TCP server that takes every connection and never writes a byte (a database that hangs). */
async function silentServer(): Promise<SilentServer> {
  const sockets: Socket[] = [];
  let closedByClient = 0;
  let closing = false;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const closeWaiters: Array<() => void> = [];
  const srv: Server = createServer((socket) => {
    sockets.push(socket);
    socket.on("error", () => undefined);
    // Read (and drop) the startup packet: a paused socket never sees the client's FIN, so never closes.
    socket.resume();
    socket.on("close", () => {
      if (closing) return;
      closedByClient++;
      if (closedByClient === sockets.length) for (const w of closeWaiters.splice(0)) w();
    });
    for (const w of waiters.filter((x) => x.n <= sockets.length)) w.resolve();
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  const server: SilentServer = {
    url: `postgres://postgres@127.0.0.1:${port}/app`,
    accepted: () => sockets.length,
    closedByClient: () => closedByClient,
    allClosedByClient: () =>
      closedByClient === sockets.length ? Promise.resolve() : new Promise((r) => closeWaiters.push(r)),
    connection: (n) =>
      n <= sockets.length ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
    close: async () => {
      closing = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => srv.close(() => r()));
    },
  };
  servers.push(server);
  return server;
}

/** `p`'s outcome, or "guard" when GUARD_MS passed first. */
async function withinGuard<T>(p: Promise<T>): Promise<{ value: T } | "guard"> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<"guard">((r) => (timer = setTimeout(() => r("guard"), GUARD_MS)));
  const outcome = await Promise.race([p.then((value) => ({ value })), guard]);
  clearTimeout(timer);
  return outcome;
}

const ping = on(http.get("/ping"), flow("ping", { do: () => ({ ok: true }) }));

const appOn = (url: string, connectTimeoutMs: number) =>
  createApp({
    modules: [{ ping }],
    env: "prod",
    logger: pino({ level: "silent" }),
    config: {
      drivers: { journal: "postgres", send: "memory" },
      database: { url, schema: "attempt_bound", connectTimeoutMs, connectAttemptTimeoutMs: ATTEMPT_MS },
      console: { port: false },
    },
  });

describe("a connection attempt to a server that never answers", () => {
  it("store.open() fails with ETIMEDOUT naming the bound, an outage; the client closes its socket", async () => {
    const srv = await silentServer();
    const store = createPostgresStore({
      connectionString: srv.url,
      schema: "attempt_bound",
      connectAttemptTimeoutMs: ATTEMPT_MS,
    });
    const err = await withinGuard(
      store.open().then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    expect(err).not.toBe("guard");
    const e = (err as { value: unknown }).value;
    expect(e).toMatchObject({
      code: "ETIMEDOUT",
      message: `connection attempt timed out after ${ATTEMPT_MS} ms`,
    });
    expect(isPostgresOutage(e)).toBe(true);
    expect(srv.accepted()).toBe(1);
    expect(await withinGuard(store.close())).not.toBe("guard");
    expect(await withinGuard(srv.allClosedByClient())).not.toBe("guard");
    expect(srv.closedByClient()).toBe(1);
  }, 60_000);

  it("boot retries after each attempt's bound, and stop() while it waits resolves on its own", async () => {
    const srv = await silentServer();
    const app = appOn(srv.url, 60_000);
    const booted = app.boot().then(
      () => "booted",
      (e: unknown) => e,
    );
    // A second connection means the first attempt ended at its bound and was retried as an outage.
    expect(await withinGuard(srv.connection(2))).not.toBe("guard");
    expect(await withinGuard(app.stop({ timeoutMs: 1_000 }))).not.toBe("guard");
    expect(await booted).toMatchObject({ code: "OKE1097" });
    // Every attempt was ended by the client, none by the test (which closes them only in cleanup).
    expect(await withinGuard(srv.allClosedByClient())).not.toBe("guard");
  }, 60_000);

  it("stop() after boot gave up with an attempt still in flight resolves once that attempt's bound ends it", async () => {
    const srv = await silentServer();
    // The boot's bound (100 ms) ends before the attempt's (200 ms): the case pg-pool alone left hanging.
    const app = appOn(srv.url, 100);
    const outcome = await withinGuard(
      app.boot().then(
        () => "booted",
        (e: unknown) => e,
      ),
    );
    expect(outcome).toMatchObject({
      value: { code: "OKE1096", message: expect.stringContaining("open() still running") as unknown },
    });
    expect(await withinGuard(app.stop({ timeoutMs: 1_000 }))).not.toBe("guard");
    expect(await withinGuard(srv.allClosedByClient())).not.toBe("guard");
    expect(srv.accepted()).toBe(1);
  }, 60_000);
});
