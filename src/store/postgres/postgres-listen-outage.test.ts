// LISTEN connection outages: a failed first connect retried like a lost connection, one warn and one info per outage, close() mid-retry, poll ticks on the monotonic clock.
import { randomBytes } from "node:crypto";
import { createConnection, createServer, type Socket } from "node:net";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Store, StoreEvent } from "../types.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { createWakeSource, encodeWake, type WakeSource, type WakeSourceOptions } from "./postgres-wake.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

/** Taken before any case fakes timers: the waits below run on real ones whatever the source's are. */
const realSetTimeout = globalThis.setTimeout;

/** Waits, re-checking every 20 ms, until `check` holds; the deadline is generous (machine speed never decides). */
async function until(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  for (const deadline = performance.now() + ms; !check();) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => realSetTimeout(r, 20));
  }
}

type Level = "warn" | "error" | "info";
/** A logger that keeps its lines. */
function keptLogger() {
  const lines: Array<{ level: Level; msg: string; fields: object }> = [];
  const at =
    (level: Level) =>
    (fields: object, msg = ""): void =>
      void lines.push({ level, msg, fields });
  return {
    logger: { warn: at("warn"), error: at("error"), info: at("info") },
    lines,
    count: (level: Level) => lines.filter((l) => l.level === level).length,
  };
}

type Mode = "forward" | "refuse" | "silent";
/**
 * A TCP front of the test PostgreSQL whose answer a case switches: `forward` (a plain proxy),
 * `refuse` (closes each connection at once: a server going down) or `silent` (takes the connection
 * and never answers: a host that hangs). It counts the connections it took in each mode.
 */
interface Gate {
  url: string;
  mode: Mode;
  accepted(mode: Mode): number;
  /** Silent connections the client has not closed yet. */
  openSilent(): number;
  /** Drops every forwarded connection (the LISTEN connection is lost). */
  cut(): void;
  close(): Promise<void>;
}

const gates: Gate[] = [];
async function startGate(): Promise<Gate> {
  const target = new URL(PG_URL);
  const counts: Record<Mode, number> = { forward: 0, refuse: 0, silent: 0 };
  const all = new Set<Socket>();
  const forwarded = new Set<Socket>();
  const silent = new Set<Socket>();
  const keep = (set: Set<Socket>, s: Socket): void => {
    set.add(s);
    s.on("close", () => set.delete(s));
  };
  const server = createServer((socket) => {
    keep(all, socket);
    socket.on("error", () => socket.destroy());
    counts[gate.mode]++;
    if (gate.mode === "refuse") return void socket.destroy();
    if (gate.mode === "silent") {
      keep(silent, socket);
      // Reading (and dropping) the startup packet: a paused socket never sees the client's FIN.
      socket.resume();
      return;
    }
    keep(forwarded, socket);
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    keep(all, upstream);
    upstream.on("error", () => upstream.destroy());
    socket.pipe(upstream);
    upstream.pipe(socket);
    socket.on("close", () => upstream.destroy());
    upstream.on("close", () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(PG_URL);
  url.hostname = "127.0.0.1";
  url.port = String((server.address() as { port: number }).port);
  const gate: Gate = {
    url: url.toString(),
    mode: "forward",
    accepted: (mode) => counts[mode],
    openSilent: () => silent.size,
    cut: () => {
      for (const s of forwarded) s.destroy();
    },
    close: async () => {
      for (const s of all) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  gates.push(gate);
  return gate;
}

const DOWN =
  /^okengine postgres: LISTEN for wake-ups is down \(.+\); polling every 3600000 ms and reconnecting until it is back$/;
const BACK = /^okengine postgres: LISTEN for wake-ups is back after \d+ ms \(\d+ connect attempts?\)$/;

describe("the LISTEN connection through outages", () => {
  const schema = freshSchema("listen");
  const channel = `okengine_${schema}`;
  let other: Store;
  let admin: pg.Client;
  const sources: WakeSource[] = [];
  beforeAll(async () => {
    // Another instance on the schema: it migrates and enqueues.
    other = await openStore(schema, { pollIntervalMs: 3_600_000 });
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
  });
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(sources.splice(0).map((s) => s.close()));
    await Promise.all(gates.splice(0).map((g) => g.close()));
  });
  afterAll(async () => {
    await admin.end();
    await other.close();
    await dropSchema(schema);
  });

  /** A wake source through `gate`, its poll an hour away: what it hears comes from LISTEN. */
  const listenThrough = (gate: Gate, extra: Partial<WakeSourceOptions> = {}) => {
    const log = keptLogger();
    const events: StoreEvent[] = [];
    const source = createWakeSource({
      connectionString: gate.url,
      channel,
      origin: randomBytes(4).toString("hex"),
      applicationName: `okengine-listen:${schema}`,
      listen: true,
      pollIntervalMs: 3_600_000,
      logger: log.logger,
      onEvents: (e) => void events.push(...e),
      backoff: { initialMs: 20, maxMs: 100 },
      ...extra,
    });
    sources.push(source);
    return { source, log, events };
  };
  const notify = async (signal: string): Promise<void> => {
    await admin.query("SELECT pg_notify($1, $2)", [channel, encodeWake({ o: "elsewhere", e: [signal] })]);
  };
  const heard = (events: StoreEvent[], signal: string) => () =>
    events.some((e) => e.kind === "enqueued" && e.signal === signal);

  it("a first connect that fails is retried like a lost connection: once back it wakes everyone and hears NOTIFY", async () => {
    const gate = await startGate();
    gate.mode = "refuse";
    const { source, log, events } = listenThrough(gate);
    // The old source rejected here and never tried again.
    await source.start().catch(() => undefined);
    await until(() => gate.accepted("refuse") >= 3, "three refused connects");
    gate.mode = "forward";
    // No poll for an hour and no new subscriber: only the source's own retry can bring these.
    await until(() => events.some((e) => e.kind === "wake"), "the wake once LISTEN is back");
    await notify("sig.first");
    await until(heard(events, "sig.first"), "a NOTIFY after it is back");
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([
      ["warn", expect.stringMatching(DOWN)],
      ["info", expect.stringMatching(BACK)],
    ]);
    expect(log.lines[1]!.fields).toMatchObject({ attempts: gate.accepted("refuse") + 1 });
  });

  it("a store whose LISTEN cannot connect at open() still opens, and hears other instances once it connects", async () => {
    const gate = await startGate();
    gate.mode = "refuse";
    // Queries go to the database directly, the LISTEN connection through the gate.
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    const log = keptLogger();
    const store = createPostgresStore({
      pool,
      connectionString: gate.url,
      schema,
      pollIntervalMs: 3_600_000,
      logger: log.logger,
    });
    const events: StoreEvent[] = [];
    const stop = store.subscribe((e) => void events.push(e));
    try {
      await store.open(); // the old store failed here: its LISTEN connection's first connect was refused
      expect(log.lines.map((l) => l.msg)).toEqual([expect.stringMatching(DOWN)]);
      gate.mode = "forward";
      await until(() => events.some((e) => e.kind === "wake"), "the wake once LISTEN is back");
      await other.enqueue(
        [{ id: "m1", signal: "sig.open", key: null, payload: {}, parentRunId: null }],
        Date.now(),
      );
      await until(heard(events, "sig.open"), "another instance's enqueue");
      expect(log.lines.map((l) => l.msg)).toEqual([expect.stringMatching(DOWN), expect.stringMatching(BACK)]);
    } finally {
      stop();
      await store.close();
      await pool.end();
    }
  });

  it("an outage of several failed tries logs one warn when it begins and one info when it ends", async () => {
    const gate = await startGate();
    const { source, log, events } = listenThrough(gate);
    await source.start();
    expect(log.lines).toEqual([]);
    gate.mode = "refuse";
    gate.cut();
    await until(() => gate.accepted("refuse") >= 4, "four refused reconnects");
    gate.mode = "forward";
    await until(() => events.some((e) => e.kind === "wake"), "the wake once LISTEN is back");
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([
      ["warn", expect.stringMatching(DOWN)],
      ["info", expect.stringMatching(BACK)],
    ]);
    // Every refused connect was a try of this outage; the one that worked is the last.
    expect(log.lines[1]!.fields).toMatchObject({ attempts: gate.accepted("refuse") + 1 });
    await notify("sig.after");
    await until(heard(events, "sig.after"), "a NOTIFY after it is back");
  });

  it("close() during a retry leaves no timer and no connection: in the backoff, and with the retry's connect in flight", async () => {
    // Only the source's timers are fake: sockets, and the waits here, run for real.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });

    // In the backoff: the connection was lost and the next try waits on a timer.
    const gate = await startGate();
    const a = listenThrough(gate, { backoff: { initialMs: 1_000, maxMs: 1_000 } });
    await a.source.start();
    expect(vi.getTimerCount()).toBe(1); // the poll
    gate.mode = "refuse";
    gate.cut();
    await until(() => a.log.count("warn") === 1 && vi.getTimerCount() === 2, "the retry's timer");
    await a.source.close();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(3_600_000);
    expect(gate.accepted("refuse")).toBe(0);
    expect(a.events).toEqual([]);

    // In flight: the retry's connect went to a host that never answers (and no connect bound is set).
    const hung = await startGate();
    const b = listenThrough(hung, { backoff: { initialMs: 1_000, maxMs: 1_000 } });
    await b.source.start();
    hung.mode = "silent";
    hung.cut();
    await until(() => b.log.count("warn") === 1 && vi.getTimerCount() === 2, "the retry's timer");
    vi.advanceTimersByTime(1_000);
    await until(() => hung.accepted("silent") === 1, "the retry connecting");
    await b.source.close();
    expect(vi.getTimerCount()).toBe(0);
    // The old close() returned with that connect still open, and it stayed open.
    await until(() => hung.openSilent() === 0, "the retry's connection closed by close()", 5_000);
    vi.advanceTimersByTime(3_600_000);
    expect(hung.accepted("silent")).toBe(1);
    expect(b.events).toEqual([]);
    expect(b.log.lines.map((l) => l.level)).toEqual(["warn"]);
  });

  it("poll ticks keep their interval when the host's wall clock steps back", async () => {
    const wall = Date.now.bind(Date);
    let reads = 0;
    // An hour back right after the first read (NTP correcting a clock that ran fast).
    const now = vi.spyOn(Date, "now").mockImplementation(() => wall() - (reads++ === 0 ? 0 : 3_600_000));
    const ticks: StoreEvent[] = [];
    const source = createWakeSource({
      connectionString: PG_URL,
      channel,
      origin: "poll",
      applicationName: `okengine-listen:${schema}`,
      listen: false,
      pollIntervalMs: 50,
      logger: keptLogger().logger,
      onEvents: (e) => void ticks.push(...e),
    });
    sources.push(source);
    try {
      await source.start();
      // The old timer took the delay from two reads of Date.now() and waited an hour.
      await until(() => ticks.length >= 3, "three poll ticks", 5_000);
    } finally {
      now.mockRestore();
    }
  });
});
