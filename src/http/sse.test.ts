// Live routes over SSE on a real socket: history then new entries, resume by id, heartbeats, slow clients.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import { connect as tcpConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { OkeConfig } from "../app/config.ts";
import type { App } from "../app/types.ts";
import { createApp, createTimeTravel, flow, http, on, signal } from "../index.ts";
import { LiveStream } from "../signal/live-runtime.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { createPostgresStore } from "../store/postgres/postgres-store.ts";
import { dropSchema, freshSchema, PG_URL } from "../store/postgres/test-support.ts";
import type { Store } from "../store/types.ts";
import { SseHub } from "./sse.ts";

// SSE over a real socket: what EventSource sees of a live route.

const orderStatus = signal.live("orders.status", { schema: z.object({ state: z.string() }) });
const modules = [
  { orderStatus },
  {
    path: "src/flows/orders/[id]/status.ts",
    exports: {
      status: on(http.get(), flow({ do: ({ id }: { id: string }, fx) => fx.live(orderStatus, { key: id }) })),
    },
  },
];

const apps: App[] = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.stop({ timeoutMs: 1_000 });
});

async function start(config: OkeConfig = {}, logger = pino({ level: "silent" }), store?: Store) {
  const app = createApp({ modules, env: "test", config, logger, ...(store === undefined ? {} : { store }) });
  apps.push(app);
  const { port } = await app.start({ port: 0, host: "127.0.0.1" });
  return { app, port };
}

/** An SSE client on a raw request: events parsed by eventsource-parser, comments counted. */
function connect(port: number, path: string, headers: Record<string, string> = {}) {
  const events: EventSourceMessage[] = [];
  let comments = 0;
  let ended = false;
  let res: IncomingMessage | undefined;
  const parser = createParser({
    onEvent: (e) => void events.push(e),
    onComment: () => void comments++,
  });
  const ready = new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers }, (r) => {
      res = r;
      r.setEncoding("utf8");
      r.on("data", (chunk: string) => parser.feed(chunk));
      r.on("end", () => (ended = true));
      r.on("close", () => (ended = true));
      r.on("error", () => (ended = true));
      resolve(r);
    });
    req.on("error", reject);
    req.end();
  });
  return {
    events,
    ready,
    get comments() {
      return comments;
    },
    get ended() {
      return ended;
    },
    close: () => res?.destroy(),
  };
}

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("live routes over SSE", () => {
  it("answers text/event-stream: history, then new entries, each with its tape position as id", async () => {
    const { app, port } = await start({ live: { heartbeatMs: 20 } });
    await app.emit(orderStatus, { state: "placed" }, { key: "o1" });
    await app.emit(orderStatus, { state: "elsewhere" }, { key: "o2" });
    const c = connect(port, "/orders/o1/status");
    const res = await c.ready;
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(res.headers["cache-control"]).toBe("no-cache");
    await until(() => c.events.length === 1, "history");
    await app.emit(orderStatus, { state: "paid" }, { key: "o1" });
    await until(() => c.events.length === 2, "new entry");
    expect(c.events.map((e) => JSON.parse(e.data) as unknown)).toEqual([
      { state: "placed" },
      { state: "paid" },
    ]);
    expect(Number(c.events[1]!.id)).toBeGreaterThan(Number(c.events[0]!.id));
    await until(() => c.comments > 0, "a heartbeat comment");
    c.close();
  });

  it("Last-Event-ID resumes exactly after that entry; a bad one is 400", async () => {
    const { app, port } = await start();
    for (const state of ["a", "b", "c"]) await app.emit(orderStatus, { state }, { key: "o1" });
    const first = connect(port, "/orders/o1/status");
    await until(() => first.events.length === 3, "all three");
    first.close();
    await app.emit(orderStatus, { state: "d" }, { key: "o1" });
    const again = connect(port, "/orders/o1/status", { "last-event-id": first.events[1]!.id! });
    await until(() => again.events.length === 2, "resumed");
    expect(again.events.map((e) => (JSON.parse(e.data) as { state: string }).state)).toEqual(["c", "d"]);
    again.close();
    const bad = connect(port, "/orders/o1/status", { "last-event-id": "yesterday" });
    expect((await bad.ready).statusCode).toBe(400);
  });

  it("a resume past entries retention took gets an event `gap` first (its id the last position gone), then what is left; a client that missed nothing gets none", async () => {
    const time = createTimeTravel(Date.parse("2026-05-01T10:00:00Z"));
    const app = createApp({ modules, env: "test", clock: time, logger: pino({ level: "silent" }) });
    apps.push(app);
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    for (const state of ["a", "b"]) await app.emit(orderStatus, { state }, { key: "o1" });
    const first = connect(port, "/orders/o1/status");
    await until(() => first.events.length === 2, "both");
    first.close();
    const seenA = first.events[0]!.id!;
    const seenB = first.events[1]!.id!;
    // A day and more later (retention 24 h): "b" expired while the client was away; "c" and "d" are left.
    time.advance("20h");
    await app.emit(orderStatus, { state: "c" }, { key: "o1" });
    time.advance("5h");
    await app.emit(orderStatus, { state: "d" }, { key: "o1" });
    const back = connect(port, "/orders/o1/status", { "last-event-id": seenA });
    await until(() => back.events.length === 3, "the gap, c and d");
    expect(back.events[0]).toMatchObject({ event: "gap", id: String(Number(seenB)) });
    const gap = JSON.parse(back.events[0]!.data) as { after: number; through: number };
    expect(gap.after).toBe(Number(seenA));
    expect(gap.through).toBe(Number(seenB));
    expect(back.events.slice(1).map((e) => [e.event, e.data])).toEqual([
      [undefined, JSON.stringify({ state: "c" })],
      [undefined, JSON.stringify({ state: "d" })],
    ]);
    back.close();
    // A reconnect from the gap's own id (a client that got the gap and nothing after it) is past it.
    const again = connect(port, "/orders/o1/status", { "last-event-id": back.events[0]!.id! });
    await until(() => again.events.length === 2, "c and d, no gap");
    expect(again.events.map((e) => e.event)).toEqual([undefined, undefined]);
    again.close();
    // Resuming at "d": nothing after it is gone, so no gap.
    const current = connect(port, "/orders/o1/status", { "last-event-id": back.events[2]!.id! });
    await app.emit(orderStatus, { state: "e" }, { key: "o1" });
    await until(() => current.events.length === 1, "e");
    expect(current.events.map((e) => e.event)).toEqual([undefined]);
    current.close();
  });

  it("a Last-Event-ID or ?after= above every position given is 400 OKE1470 naming that input, not a stream that waits in silence; the head itself resumes", async () => {
    const { app, port } = await start();
    for (const state of ["a", "b"]) await app.emit(orderStatus, { state }, { key: "o1" });
    const first = connect(port, "/orders/o1/status");
    await until(() => first.events.length === 2, "both");
    first.close();
    const head = Number(first.events[1]!.id);
    for (const [path, headers, message] of [
      [
        "/orders/o1/status",
        { "last-event-id": String(head + 1_000) },
        `Last-Event-ID ${head + 1_000} is above every position the store's tapes have given: not the id of an event a live stream sent`,
      ],
      [
        `/orders/o1/status?after=${head + 1}`,
        {},
        `after ${head + 1} is above every position the store's tapes have given: not the id of an event a live stream sent`,
      ],
      [
        "/orders/o1/status?after=yesterday",
        {},
        "after must be a tape position (the id of an event a live stream sent)",
      ],
      [
        "/orders/o1/status",
        { "last-event-id": "yesterday" },
        "Last-Event-ID must be a tape position (the id of an event a live stream sent)",
      ],
    ] as const) {
      const past = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
      expect(past.status).toBe(400);
      expect(await past.json()).toEqual({ ok: false, error: { code: "OKE1470", message } });
    }
    // At the head: nothing to replay, and the next entry arrives.
    const atHead = connect(port, "/orders/o1/status", { "last-event-id": String(head) });
    expect((await atHead.ready).statusCode).toBe(200);
    await app.emit(orderStatus, { state: "c" }, { key: "o1" });
    await until(() => atHead.events.length === 1, "the next entry");
    expect(JSON.parse(atHead.events[0]!.data)).toEqual({ state: "c" });
    atHead.close();
  });

  it("a driver without the optional lastTapePosition: a resume is followed unchecked, and the instance warns once", async () => {
    const lines: { msg: string; driver?: string }[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const memory = createMemoryStore();
    // A third-party driver from before the method: the memory driver with it hidden.
    const older = new Proxy(memory, {
      get: (t, k) => (k === "lastTapePosition" ? undefined : k === "driver" ? "older" : Reflect.get(t, k)),
    });
    const { app, port } = await start({}, logger, older);
    await app.emit(orderStatus, { state: "a" }, { key: "o1" });
    const first = connect(port, "/orders/o1/status");
    await until(() => first.events.length === 1, "the entry");
    first.close();
    const head = Number(first.events[0]!.id);
    const unchecked =
      "live: the store's driver has no lastTapePosition; resume positions (Last-Event-ID, ?after=) are followed unchecked";
    // Above every position: followed (200), not refused, as nothing bounds it.
    const above = connect(port, "/orders/o1/status", { "last-event-id": String(head + 1) });
    expect((await above.ready).statusCode).toBe(200);
    const again = connect(port, "/orders/o1/status", { "last-event-id": String(head) });
    expect((await again.ready).statusCode).toBe(200);
    await app.emit(orderStatus, { state: "b" }, { key: "o1" });
    await until(() => again.events.length === 1, "the next entry after the head");
    expect(JSON.parse(again.events[0]!.data)).toEqual({ state: "b" });
    above.close();
    again.close();
    expect(lines.filter((l) => l.msg === unchecked)).toEqual([expect.objectContaining({ driver: "older" })]);
  });

  it("caps open streams per instance: one more is 503 with Retry-After", async () => {
    const { port } = await start({ live: { maxConnections: 1 } });
    const a = connect(port, "/orders/o1/status");
    expect((await a.ready).statusCode).toBe(200);
    const b = connect(port, "/orders/o1/status");
    const res = await b.ready;
    expect(res.statusCode).toBe(503);
    expect(res.headers["retry-after"]).toBe("5");
    a.close();
  });

  it("open streams do not count against http.maxConnections: requests are served beside more streams than the HTTP cap", async () => {
    const { port } = await start({ http: { maxConnections: 2 }, live: { maxConnections: 5 } });
    const streams = Array.from({ length: 4 }, () => connect(port, "/orders/o1/status"));
    for (const st of streams) expect((await st.ready).statusCode).toBe(200);
    // Four sockets hold streams: two ordinary connections still fit under the HTTP cap of 2.
    const raw = (): Promise<{ socket: Socket; text: () => string; closed: Promise<void> }> =>
      new Promise((resolve, reject) => {
        const socket = tcpConnect(port, "127.0.0.1");
        let text = "";
        socket.setEncoding("utf8");
        socket.on("data", (d: string) => (text += d));
        const closed = new Promise<void>((r) => socket.once("close", () => r()));
        socket.once("error", () => undefined);
        socket.once("connect", () => resolve({ socket, text: () => text, closed }));
        socket.once("error", reject);
      });
    const health = (c: { socket: Socket; text: () => string }) =>
      new Promise<string>((resolve) => {
        c.socket.once("data", () => resolve(c.text()));
        c.socket.write("GET /_/health HTTP/1.1\r\nhost: x\r\n\r\n");
      });
    const held = [await raw(), await raw()];
    for (const c of held) expect(await health(c)).toMatch(/^HTTP\/1\.1 200 /);
    // A third ordinary connection is past the HTTP cap: closed unanswered, streams or not.
    const extra = await raw();
    extra.socket.write("GET /_/health HTTP/1.1\r\nhost: x\r\n\r\n");
    await extra.closed;
    expect(extra.text()).toBe("");
    // The streams are still there and still the live cap's business.
    expect(streams.every((st) => !st.ended)).toBe(true);
    for (const c of held) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
    for (const st of streams) st.close();
    await until(async () => {
      const r = await fetch(`http://127.0.0.1:${port}/_/health`).catch(() => undefined);
      return r?.status === 200;
    }, "served again");
  });

  it("disconnects a client whose unread buffer passes the bound", async () => {
    const records: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: "warn" },
      { write: (l: string) => void records.push(JSON.parse(l) as Record<string, unknown>) },
    );
    const { app, port } = await start({ live: { maxBufferBytes: 64 * 1024 } }, logger);
    const c = connect(port, "/orders/o1/status");
    const res = await c.ready;
    res.pause(); // reads nothing more: the kernel buffers fill, then node's
    const big = "x".repeat(200_000);
    for (let i = 0; i < 200 && !records.some((r) => String(r.msg).startsWith("live: client too slow")); i++) {
      await app.emit(orderStatus, { state: big }, { key: "o1" });
      await new Promise((r) => setImmediate(r));
    }
    await until(
      () => records.some((r) => String(r.msg).startsWith("live: client too slow")),
      "slow client log",
    );
    expect(app.readiness().ready).toBe(true);
  });

  it("shutdown ends open streams cleanly", async () => {
    const { app, port } = await start();
    const c = connect(port, "/orders/o1/status");
    await c.ready;
    await app.stop({ timeoutMs: 2_000 });
    await until(() => c.ended, "stream ended");
  });

  it("while the instance stops, an EventSource's reconnect gets an empty stream that ends (it reconnects), any other client 503 OKE1471", async () => {
    const { app, port } = await start();
    // The window between ending the streams and closing the listener, held open.
    (app as unknown as { sse: { closeAll(): void } }).sse.closeAll();
    const es = await fetch(`http://127.0.0.1:${port}/orders/o1/status`, {
      headers: { accept: "text/event-stream" },
    });
    expect(es.status).toBe(200);
    expect(es.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(await es.text()).toMatch(/^retry: \d+\n\n$/);
    const other = await fetch(`http://127.0.0.1:${port}/orders/o1/status`);
    expect(other.status).toBe(503);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe("OKE1471");
  });

  it("in-process requests refuse a live route with 501", async () => {
    const app = createApp({ modules, env: "test" });
    apps.push(app);
    const res = await app.request("/orders/o1/status");
    expect(res.status).toBe(501);
  });
});

describe.each([
  {
    driver: "file",
    make: (): { store: Store; cleanup: () => Promise<void> } => {
      const dir = mkdtempSync(join(tmpdir(), "oke-sse-prune-"));
      return {
        store: createFileStore({ dir }),
        cleanup: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    driver: "postgres",
    make: (): { store: Store; cleanup: () => Promise<void> } => {
      const schema = freshSchema("sse_prune");
      return {
        store: createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 }),
        cleanup: () => dropSchema(schema),
      };
    },
  },
])("a resume after the tape was pruned empty ($driver driver)", ({ make }) => {
  it("Last-Event-ID of the last entry sent is 200: nothing to replay, then the new entries", async () => {
    const { store, cleanup } = make();
    try {
      const { app, port } = await start({}, undefined, store);
      for (const state of ["a", "b", "c"]) await app.emit(orderStatus, { state }, { key: "t1" });
      const first = connect(port, "/orders/t1/status");
      await until(() => first.events.length === 3, "all three");
      first.close();
      const lastId = first.events[2]!.id!;
      // What retention does once the entries are old: the tape is emptied, its head drops.
      expect(await app.store.pruneTape("orders.status", Date.now() + 3_600_000, 1_000)).toBe(3);
      expect(await app.store.tapeHead("orders.status", "t1")).toBe(0);

      const again = connect(port, "/orders/t1/status", { "last-event-id": lastId });
      expect((await again.ready).statusCode).toBe(200);
      await app.emit(orderStatus, { state: "d" }, { key: "t1" });
      await until(() => again.events.length === 1, "the next entry");
      expect(JSON.parse(again.events[0]!.data)).toEqual({ state: "d" });
      expect(Number(again.events[0]!.id)).toBeGreaterThan(Number(lastId));
      again.close();

      // An id above every position given is still refused.
      const above = Number(again.events[0]!.id) + 1;
      const past = await fetch(`http://127.0.0.1:${port}/orders/t1/status`, {
        headers: { "last-event-id": String(above) },
      });
      expect(past.status).toBe(400);
      expect(((await past.json()) as { error: { code: string } }).error.code).toBe("OKE1470");
      await app.stop({ timeoutMs: 1_000 });
      apps.splice(apps.indexOf(app), 1);
    } finally {
      await cleanup();
    }
  });
});

describe("SseHub, when following the tape fails", () => {
  it("a subscribe that throws ends the stream (the client reconnects), logs why, and frees its slot", async () => {
    let fail = true;
    const lines: Array<{ level: number; msg: string; signal?: string }> = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const hub = new SseHub(
      {
        live: () => {
          if (fail) throw new Error("tape unavailable");
          return () => undefined;
        },
      },
      { maxConnections: 1, maxBufferBytes: 1 << 20, heartbeatMs: 60_000 },
      logger,
    );
    const server = createServer((req, res) => hub.serve(req, res, new LiveStream(orderStatus, "o1")));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as { port: number };
      const get = () =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          httpRequest({ port, path: "/", headers: { accept: "text/event-stream" } }, (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          })
            .on("error", reject)
            .end();
        });
      // The 200 and `retry:` are sent before the tape is followed; the stream then ends.
      expect(await get()).toEqual({ status: 200, body: "retry: 1000\n\n" });
      expect(hub.size).toBe(0);
      expect(lines).toEqual([
        expect.objectContaining({
          level: 50,
          signal: "orders.status",
          msg: "live: the stream could not follow its tape and was closed (the client reconnects)",
        }),
      ]);
      // The slot was given back: with a cap of one stream, the next client is served, not refused.
      fail = false;
      const next = connect(port, "/");
      expect((await next.ready).statusCode).toBe(200);
      await until(() => hub.size === 1, "the second stream is open");
      next.close();
    } finally {
      hub.closeAll();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
