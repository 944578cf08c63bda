// SSE replay under backpressure, on a real socket: a large resume arrives in one connection; only a client that stays full is cut.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { App } from "../app/types.ts";
import { systemClock } from "../clock/clock.ts";
import { createApp, flow, http, on, signal } from "../index.ts";
import { LiveRuntime, LiveStream, type ReplayPace } from "../signal/live-runtime.ts";
import type { SignalHandle } from "../signal/signal.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { SseHub, type LiveSource, type SseLimits } from "./sse.ts";

const feed = signal.live("replay.feed", { schema: z.object({ n: z.number(), fill: z.string() }) });
const modules = [
  { feed },
  {
    path: "src/flows/feed/[id].ts",
    exports: {
      feed: on(http.get(), flow({ do: ({ id }: { id: string }, fx) => fx.live(feed, { key: id }) })),
    },
  },
];
/** 20 KB per entry: 300 of them are a replay of about 6 MB, several times the default 1 MiB bound. */
const FILL = "x".repeat(20_000);
const TOO_SLOW = "live: client too slow, disconnected (it resumes from its last id)";

/** A condition re-checked whenever something it depends on changes (no sleeps); fails after 20 s. */
class Changes {
  private readonly waiters = new Set<() => void>();
  changed(): void {
    for (const w of [...this.waiters]) w();
  }
  when(check: () => boolean, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const test = (): void => {
        if (!check()) return;
        this.waiters.delete(test);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(test);
        reject(new Error(`timed out waiting for ${what}`));
      }, 20_000);
      this.waiters.add(test);
      test();
    });
  }
}

function recordingLogger(changes: Changes) {
  const records: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "warn" },
    {
      write: (line: string) => {
        records.push(JSON.parse(line) as Record<string, unknown>);
        changes.changed();
      },
    },
  );
  return { logger, records, slow: () => records.filter((r) => r.msg === TOO_SLOW) };
}

/** An SSE client on a raw request (one connection, never reconnects): events parsed as they are read. */
function connect(changes: Changes, port: number, path: string, headers: Record<string, string> = {}) {
  const events: EventSourceMessage[] = [];
  let ended = false;
  const parser = createParser({
    onEvent: (e) => {
      events.push(e);
      changes.changed();
    },
  });
  const end = (): void => {
    ended = true;
    changes.changed();
  };
  const ready = new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers }, (res) => {
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => parser.feed(chunk));
      res.on("end", end);
      res.on("close", end);
      res.on("error", end);
      resolve(res);
    });
    req.on("error", reject);
    req.end();
  });
  return {
    events,
    ready,
    get ended() {
      return ended;
    },
    numbers: () => events.map((e) => (JSON.parse(e.data) as { n: number }).n),
    ids: () => events.map((e) => Number(e.id)),
  };
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
const increasing = (xs: number[]): boolean => xs.every((x, i) => i === 0 || x > xs[i - 1]!);

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

describe("a resume over a large backlog (app, default bound)", () => {
  it("a client that reads promptly gets every entry in one connection, in order, then follows; nothing is too slow", async () => {
    const changes = new Changes();
    const log = recordingLogger(changes);
    const app: App = createApp({ modules, env: "test", logger: log.logger });
    closers.push(() => app.stop({ timeoutMs: 2_000 }));
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });

    await app.emit(feed, { n: 0, fill: "" }, { key: "k" });
    // The id a client that saw that entry resumes with.
    const lastSeen = String(await app.store.tapeHead(feed.name, "k"));
    for (const n of range(1, 301)) await app.emit(feed, { n, fill: FILL }, { key: "k" });

    const again = connect(changes, port, "/feed/k", { "last-event-id": lastSeen });
    expect((await again.ready).statusCode).toBe(200);
    await changes.when(() => again.events.length >= 300 || again.ended, "the replay, or the stream's end");
    expect(again.ended).toBe(false);
    expect(again.numbers()).toEqual(range(1, 301));
    expect(increasing(again.ids())).toBe(true);
    expect(Number(again.ids()[0])).toBeGreaterThan(Number(lastSeen));

    // The same connection then follows the tape.
    await app.emit(feed, { n: 301, fill: "" }, { key: "k" });
    await changes.when(
      () => again.events.length === 301 || again.ended,
      "the entry appended after the replay",
    );
    expect(again.numbers()).toEqual(range(1, 302));
    expect(again.ended).toBe(false);
    expect(log.slow()).toEqual([]);
  }, 60_000);
});

describe("SseHub replay backpressure (real runtime, real socket)", () => {
  const signals = new Map<string, SignalHandle>([[feed.name, feed]]);

  /**
   * A hub over a real LiveRuntime on a memory store and a real HTTP server. The source passes every
   * call through and counts the replay's pauses and its switch to following (what a test waits on).
   */
  async function setup(limits: Partial<SseLimits>) {
    const changes = new Changes();
    const log = recordingLogger(changes);
    const store: Store = createMemoryStore();
    await store.open();
    const rt = new LiveRuntime({ store, clock: systemClock, logger: log.logger, signals });
    const seen = { paused: 0, following: 0 };
    const source: LiveSource = {
      live(sig, options, listener, pace) {
        const observed: ReplayPace | undefined =
          pace === undefined
            ? undefined
            : {
                full: () => pace.full(),
                paused: (resume) => {
                  seen.paused++;
                  changes.changed();
                  pace.paused(resume);
                },
                following: () => {
                  seen.following++;
                  changes.changed();
                  pace.following();
                },
              };
        return rt.live(sig, options, listener, observed);
      },
    };
    const hub = new SseHub(
      source,
      { maxConnections: 10, maxBufferBytes: 64 * 1024, heartbeatMs: 60_000, ...limits },
      log.logger,
    );
    hub.watch(() => changes.changed());
    const server: Server = createServer((req, res) => hub.serve(req, res, new LiveStream(feed, "k")));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    closers.push(async () => {
      hub.closeAll();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await rt.stop(2_000);
      await store.close();
    });
    const { port } = server.address() as { port: number };
    return { changes, log, hub, port, seen, store };
  }

  async function appendRange(store: Store, from: number, to: number, fill: string): Promise<void> {
    for (const n of range(from, to))
      await store.appendTape(
        [{ id: `e${n}`, signal: feed.name, key: "k", payload: { n, fill } }],
        systemClock.now(),
      );
  }

  it("a client that stops reading during the replay is waited for, and gets everything in order once it reads again", async () => {
    const t = await setup({});
    await appendRange(t.store, 0, 600, FILL);
    const c = connect(t.changes, t.port, "/");
    const res = await c.ready;
    res.pause(); // reads nothing: the kernel's buffers fill, then node's past the bound
    await t.changes.when(() => t.seen.paused > 0, "the replay to pause on the full buffer");
    // Appended while the replay waits: the reader gets them after the backlog, once.
    await appendRange(t.store, 600, 603, "");
    res.resume();
    await t.changes.when(() => c.events.length >= 603 || c.ended, "the whole tape, or the stream's end");
    expect(c.ended).toBe(false);
    expect(c.numbers()).toEqual(range(0, 603));
    expect(increasing(c.ids())).toBe(true);
    await t.changes.when(() => t.seen.following === 1, "the stream to follow the tape");
    await appendRange(t.store, 603, 604, "");
    await t.changes.when(() => c.events.length === 604 || c.ended, "the next entry, followed");
    expect(c.numbers()).toEqual(range(0, 604));
    expect(t.log.slow()).toEqual([]);
    expect(t.hub.size).toBe(1);
  }, 60_000);

  it("a client that does not drain within replayDrainMs is disconnected as too slow, and resumes from its last id", async () => {
    const t = await setup({ replayDrainMs: 200 });
    await appendRange(t.store, 0, 600, FILL);
    const c = connect(t.changes, t.port, "/");
    const res = await c.ready;
    res.pause();
    await t.changes.when(() => t.log.slow().length === 1, "the too-slow disconnect");
    expect(t.seen.paused).toBeGreaterThan(0); // it waited for a drain first
    expect(t.log.slow()[0]).toMatchObject({ replaying: true, waitedMs: 200, signal: feed.name, key: "k" });
    await t.changes.when(() => t.hub.size === 0, "the stream to be closed");
    // What reached the client before the cut is a prefix of the tape; a resume from its last id is
    // the rest, once each.
    res.resume();
    await t.changes.when(() => c.ended, "the client to see the end");
    expect(c.events.length).toBeLessThan(600);
    expect(c.numbers()).toEqual(range(0, c.events.length));
    const rest = connect(t.changes, t.port, "/", { "last-event-id": c.events.at(-1)!.id! });
    await t.changes.when(() => rest.events.length >= 600 - c.events.length || rest.ended, "the rest");
    expect([...c.numbers(), ...rest.numbers()]).toEqual(range(0, 600));
    expect(t.log.slow()).toHaveLength(1);
  }, 60_000);

  it("a client that stops reading while following is disconnected at the bound, without waiting for a drain", async () => {
    // A drain wait as long as the test: a follow that waited for one would never cut the client.
    const t = await setup({ replayDrainMs: 600_000 });
    const c = connect(t.changes, t.port, "/");
    const res = await c.ready;
    await t.changes.when(() => t.seen.following === 1, "the stream to follow the (empty) tape");
    res.pause();
    const big = "y".repeat(200_000);
    for (let n = 0; n < 200 && t.log.slow().length === 0; n++) {
      await appendRange(t.store, n, n + 1, big);
      await new Promise((r) => setImmediate(r));
    }
    await t.changes.when(() => t.log.slow().length === 1, "the too-slow disconnect");
    expect(t.log.slow()[0]).not.toHaveProperty("replaying");
    expect(t.seen.paused).toBe(0);
    await t.changes.when(() => t.hub.size === 0, "the stream to be closed");
  }, 60_000);
});
