/** Server-sent events for live tapes: one stream per request, resumable by Last-Event-ID, bounded and capped. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log/logger.ts";
import type {
  LiveEntry,
  LiveGap,
  LiveListener,
  LiveOptionsRead,
  LiveStream,
  ReplayPace,
} from "../signal/live-runtime.ts";
import type { LiveSignal } from "../signal/signal.ts";
import type { Store } from "../store/types.ts";

/** Where streams read tapes from (the app's live runtime). */
export interface LiveSource {
  live<P>(
    signal: LiveSignal<P>,
    options: LiveOptionsRead,
    listener: LiveListener<P>,
    pace?: ReplayPace,
  ): () => void;
  /**
   * The store the tapes are in: its last tape position bounds a resume (OKE1470). Without it, or a
   * driver without `lastTapePosition`, any position is followed.
   */
  readonly store?: Pick<Store, "driver" | "open" | "lastTapePosition">;
}

export interface SseLimits {
  /** Open streams per instance; one more is answered 503 with Retry-After. */
  maxConnections: number;
  /**
   * Bytes queued for one client. Following the tape, a client past it counts as too slow and is
   * disconnected; replaying, the replay waits for the client to drain (up to `replayDrainMs`).
   */
  maxBufferBytes: number;
  /** How long a replay waits for a client past `maxBufferBytes` to drain before it is too slow. Default 30 s. */
  replayDrainMs?: number;
  /** Period of the `: ping` comment that keeps idle connections open through proxies. */
  heartbeatMs: number;
}

/** True for a client that asked for an event stream (EventSource always sends this Accept). */
const wantsEventStream = (req: IncomingMessage): boolean =>
  (req.headers.accept ?? "").toLowerCase().includes("text/event-stream");

/** A stream refused before its 200: the JSON error envelope. */
function refuseStream(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): void {
  const body = JSON.stringify({ ok: false, error: { code, message } });
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    ...extra,
  });
  res.end(body);
}

/** What EventSource waits before reconnecting (ms), sent as the stream's `retry:` field. */
const RETRY_MS = 1_000;
/** How long a replay waits for a full client to drain (docs/signals.md) before it is too slow. */
export const REPLAY_DRAIN_MS = 30_000;

interface OpenStream {
  res: ServerResponse;
  close(): void;
}

/** A resume position the client sent, and the input it came in (named in a refusal). */
export interface ResumePosition {
  /** The position, or "bad" for text that is not one. */
  position: number | "bad";
  from: "Last-Event-ID" | "after";
}

/** The last position the client saw: the Last-Event-ID header (EventSource reconnects), else `?after=`. */
export function resumePosition(req: IncomingMessage): ResumePosition | undefined {
  const header = req.headers["last-event-id"];
  if (typeof header === "string" && header !== "")
    return { position: parsePosition(header), from: "Last-Event-ID" };
  const q = (req.url ?? "").indexOf("?");
  const fromQuery = q === -1 ? null : new URLSearchParams((req.url ?? "").slice(q + 1)).get("after");
  if (fromQuery === null || fromQuery === "") return undefined;
  return { position: parsePosition(fromQuery), from: "after" };
}

const parsePosition = (text: string): number | "bad" => (/^\d{1,16}$/.test(text) ? Number(text) : "bad");

/**
 * The number of open SSE streams, watched by the HTTP server: a socket that
 * holds a stream counts against `live.maxConnections`, not `http.maxConnections`.
 */
export interface StreamCount {
  readonly size: number;
  /** Called with the new count whenever a stream opens or closes; returns the unwatch. */
  watch(listener: (size: number) => void): () => void;
}

/**
 * Sent before the replay when retention took entries after the client's last id: a named event,
 * which `onmessage` never sees; a client that keeps state from the stream listens for it
 * (`addEventListener("gap", …)`) and reads its state afresh. Its id is the last position gone, so a
 * reconnect resumes past the gap instead of being told of it again (a quiet tape, no entry since,
 * told it on every reconnect had its page reload its state each time).
 */
const gapFrame = (gap: LiveGap): string => `id: ${gap.through}\nevent: gap\ndata: ${JSON.stringify(gap)}\n\n`;

const frame = (e: LiveEntry): string =>
  `id: ${e.position}\ndata: ${JSON.stringify(e.payload === undefined ? null : e.payload)}\n\n`;

/**
 * The open SSE streams of one app instance. `serve` takes over a response:
 * replays the tape after the client's last id, then follows it; `closeAll`
 * ends every stream at shutdown (clients reconnect elsewhere and resume).
 */
export class SseHub implements StreamCount {
  private readonly open = new Set<OpenStream>();
  private readonly watchers = new Set<(size: number) => void>();
  private closing = false;
  /** The warning that resumes go unchecked (a driver without lastTapePosition) was logged. */
  private uncheckedResumeLogged = false;

  constructor(
    private readonly source: LiveSource,
    private readonly limits: SseLimits,
    private readonly logger: Logger,
  ) {}

  get size(): number {
    return this.open.size;
  }

  watch(listener: (size: number) => void): () => void {
    this.watchers.add(listener);
    return () => {
      this.watchers.delete(listener);
    };
  }

  private changed(): void {
    for (const w of this.watchers) w(this.open.size);
  }

  serve(req: IncomingMessage, res: ServerResponse, stream: LiveStream): void {
    const resume = resumePosition(req);
    if (resume?.position === "bad")
      return refuseStream(
        res,
        400,
        "OKE1470",
        `${resume.from} must be a tape position (the id of an event a live stream sent)`,
      );
    const after = resume?.position;
    const store = this.source.store;
    if (resume !== undefined && after !== undefined && after > 0 && store !== undefined) {
      const lastTapePosition = store.lastTapePosition?.bind(store);
      if (lastTapePosition === undefined) {
        // A third-party driver from before the method: nothing to bound the resume by. Said once, as
        // a made-up id above every position then waits in silence.
        if (!this.uncheckedResumeLogged) {
          this.uncheckedResumeLogged = true;
          this.logger.warn(
            { signal: stream.signal.name, driver: store.driver },
            "live: the store's driver has no lastTapePosition; resume positions (Last-Event-ID, ?after=) are followed unchecked",
          );
        }
        return this.follow(req, res, stream, after);
      }
      // A position above every one the store's tapes have given is no event's id (a restored
      // database, a made-up id): followed, it would wait in silence until the positions caught up,
      // then skip everything up to it. Bounded by the store-wide counter, not this tape's head: a
      // prune that empties the tape lowers its head, not the positions its clients saw. One read per
      // connect, before the 200, so the stream can still be refused.
      void store
        .open()
        .then(() => lastTapePosition())
        .then(
          (last) => {
            if (after <= last) return this.follow(req, res, stream, after);
            this.logger.debug(
              { signal: stream.signal.name, key: stream.key, after, last },
              "live: stream refused, resume position above every position given (OKE1470)",
            );
            refuseStream(
              res,
              400,
              "OKE1470",
              `${resume.from} ${after} is above every position the store's tapes have given: not the id of an event a live stream sent`,
            );
          },
          (err: unknown) => {
            this.logger.warn(
              { signal: stream.signal.name, key: stream.key, err },
              "live: the last tape position could not be read; following from the position asked",
            );
            this.follow(req, res, stream, after);
          },
        );
      return;
    }
    this.follow(req, res, stream, after);
  }

  /** Serves the stream from `after` (checked): closing, the connection cap, then the 200 and the tape. */
  private follow(
    req: IncomingMessage,
    res: ServerResponse,
    stream: LiveStream,
    after: number | undefined,
  ): void {
    if (this.closing) {
      // EventSource takes any answer but 200 as final and never reconnects, and a reconnect can reach
      // this instance while it stops (still listening, or over a kept-alive socket). An empty stream
      // that ends at once makes it reconnect after `retry` instead: elsewhere, or here restarted.
      if (wantsEventStream(req)) {
        res.writeHead(200, {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
        });
        res.end(`retry: ${RETRY_MS}\n\n`);
        return;
      }
      return refuseStream(res, 503, "OKE1471", "The server is shutting down", { "retry-after": "1" });
    }
    if (this.open.size >= this.limits.maxConnections) {
      this.logger.warn(
        { open: this.open.size, signal: stream.signal.name },
        "live: stream refused, connection cap reached",
      );
      return refuseStream(
        res,
        503,
        "OKE1472",
        `Too many live streams on this instance (${this.limits.maxConnections})`,
        {
          "retry-after": "5",
        },
      );
    }
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      // nginx buffers responses unless told not to.
      "x-accel-buffering": "no",
    });
    // Every write counts until node has handed it to the kernel: a paused replay goes on once all
    // are (the buffer drained: the moment node emits 'drain'), whatever the bound is next to node's
    // own high-water mark, below which a full buffer emits no 'drain'.
    let unflushed = 0;
    let onFlushed: (() => void) | undefined;
    const send = (text: string): void => {
      unflushed++;
      res.write(text, () => {
        if (--unflushed > 0 || onFlushed === undefined) return;
        const flushed = onFlushed;
        onFlushed = undefined;
        flushed();
      });
    };
    send(`retry: ${RETRY_MS}\n\n`);
    // Small writes, sent as they come: no Nagle delay between an emit and the client.
    req.socket.setNoDelay(true);
    let done = false;
    // Replaying, a full buffer pauses the replay (the client drains it); following, it cuts the client.
    let replaying = true;
    let drainTimer: NodeJS.Timeout | undefined;
    // Assigned below; declared first so close() can run before it exists (a subscribe that throws,
    // or a listener that finds the client too slow while the tape is still being subscribed).
    let unsubscribe = (): void => undefined;
    const full = (): boolean => res.writableLength > this.limits.maxBufferBytes;
    const heartbeat = setInterval(() => {
      if (done) return;
      if (replaying ? !full() : !tooSlow()) send(": ping\n\n");
    }, this.limits.heartbeatMs);
    heartbeat.unref();
    const entry: OpenStream = {
      res,
      close: () => {
        if (done) return;
        done = true;
        this.open.delete(entry);
        this.changed();
        clearInterval(heartbeat);
        clearTimeout(drainTimer);
        onFlushed = undefined;
        unsubscribe();
        if (!res.writableEnded) res.end();
      },
    };
    this.open.add(entry);
    this.changed();
    const disconnect = (extra: Record<string, unknown>): void => {
      this.logger.warn(
        { signal: stream.signal.name, key: stream.key, buffered: res.writableLength, ...extra },
        "live: client too slow, disconnected (it resumes from its last id)",
      );
      entry.close();
      res.destroy();
    };
    const tooSlow = (): boolean => {
      if (!full()) return false;
      disconnect({});
      return true;
    };
    const replayDrainMs = this.limits.replayDrainMs ?? REPLAY_DRAIN_MS;
    const pace: ReplayPace = {
      full,
      paused: (resume) => {
        if (done) return;
        // The tape's reads go on for everyone else meanwhile; only this stream's replay waits.
        drainTimer = setTimeout(() => {
          onFlushed = undefined;
          if (!done) disconnect({ replaying: true, waitedMs: replayDrainMs });
        }, replayDrainMs);
        drainTimer.unref();
        const drained = (): void => {
          clearTimeout(drainTimer);
          drainTimer = undefined;
          if (!done) resume();
        };
        if (unflushed === 0) setImmediate(drained);
        else onFlushed = drained;
      },
      following: () => {
        replaying = false;
      },
    };
    try {
      unsubscribe = this.source.live(
        stream.signal,
        {
          ...(stream.key === undefined ? {} : { key: stream.key }),
          ...(after === undefined ? {} : { after }),
          onGap: (gap) => {
            if (!done) send(gapFrame(gap));
          },
        },
        (e) => {
          // A replayed entry comes only while the buffer has room (the pace), so this cuts only
          // a client that falls behind the tape as it is followed.
          if (done || (!replaying && tooSlow())) return;
          send(frame(e));
        },
        pace,
      );
    } catch (e) {
      // The 200 is already sent: ending the stream makes the client reconnect after `retry`, and the
      // log says why; the entry must not stay counted against maxConnections.
      this.logger.error(
        { signal: stream.signal.name, key: stream.key, err: e },
        "live: the stream could not follow its tape and was closed (the client reconnects)",
      );
      entry.close();
      return;
    }
    if (done) {
      unsubscribe();
      return;
    }
    res.on("close", () => entry.close());
  }

  /** Ends every open stream (shutdown) and refuses new ones. */
  closeAll(): void {
    this.closing = true;
    for (const s of [...this.open]) s.close();
  }
}
