/** Reads a request body with a size limit and parses JSON, for node:http and fetch alike. */
import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import { httpErrors } from "./envelope.ts";

export const TOO_LARGE: unique symbol = Symbol("body too large");

/** The client went away (or the stream broke) before the body was complete. */
export class BodyInterrupted extends Error {
  override readonly name = "BodyInterrupted";
}

/** A request body, however it arrives (node stream or web stream). */
export interface BodySource {
  /** Content-Length when the client sent one. */
  length: number | undefined;
  /** Whether a body follows at all. */
  present: boolean;
  contentType: string | undefined;
  /**
   * Reads at most `limit` bytes; past that it stops reading and answers
   * TOO_LARGE. A callback, not a promise: it saves a microtask per request.
   */
  read(limit: number, done: (result: BodyResult) => void): void;
}

export type BodyResult = Buffer | typeof TOO_LARGE | BodyInterrupted;

const parseLength = (v: string | null | undefined): number | undefined => {
  if (v === undefined || v === null || v === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
};

// Hot path note: under tsx (how `oke` runs), esbuild's keepNames wraps every
// named closure in __name(), a defineProperty per closure per request. The
// readers below therefore use a class and inline anonymous callbacks; named
// per-request closures cost ~3 µs/request here (measured with --cpu-prof).

class NodeBody implements BodySource {
  readonly length: number | undefined;
  readonly present: boolean;
  readonly contentType: string | undefined;

  constructor(private readonly req: IncomingMessage) {
    this.length = parseLength(req.headers["content-length"]);
    this.present =
      this.length === undefined ? req.headers["transfer-encoding"] !== undefined : this.length > 0;
    this.contentType = req.headers["content-type"];
  }

  read(limit: number, done: (result: BodyResult) => void): void {
    const req = this.req;
    const chunks: Buffer[] = [];
    let total = 0;
    // One flag instead of removing listeners: the request object dies with the request.
    let settled = false;
    req.on("data", (chunk: Buffer) => {
      if (settled) return;
      total += chunk.length;
      if (total > limit) {
        // Stop here: the adapter answers 413 and closes the connection; the rest is never buffered.
        settled = true;
        req.pause();
        done(TOO_LARGE);
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (settled) return;
      settled = true;
      done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    });
    req.on("error", (e: Error) => {
      if (settled) return;
      settled = true;
      done(new BodyInterrupted(e.message));
    });
    req.on("close", () => {
      if (settled) return;
      settled = true;
      done(new BodyInterrupted("connection closed"));
    });
  }
}

export const nodeBody = (req: IncomingMessage): BodySource => new NodeBody(req);

export function webBody(request: Request): BodySource {
  const length = parseLength(request.headers.get("content-length"));
  return {
    length,
    present: request.body !== null && length !== 0,
    contentType: request.headers.get("content-type") ?? undefined,
    read: (limit, done) =>
      void readWeb(request, limit).then(done, (e: unknown) =>
        done(e instanceof BodyInterrupted ? e : new BodyInterrupted(String(e))),
      ),
  };
}

async function readWeb(request: Request, limit: number): Promise<Buffer | typeof TOO_LARGE> {
  if (request.body === null) return Buffer.alloc(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const step = await reader.read().catch((e: unknown) => {
      throw new BodyInterrupted(e instanceof Error ? e.message : String(e));
    });
    if (step.done) break;
    const chunk = step.value as Uint8Array;
    total += chunk.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      return TOO_LARGE;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** `application/json`, `application/problem+json`, with or without parameters. */
export function isJsonType(contentType: string): boolean {
  const semi = contentType.indexOf(";");
  const mime = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return mime === "application/json" || (mime.startsWith("application/") && mime.endsWith("+json"));
}

/** Empty body → undefined; otherwise JSON, an OKE1440 (not UTF-8) or an OKE1400. */
export function parseJsonBody(buf: Buffer): unknown {
  if (buf.length === 0) return undefined;
  // toString("utf8") would replace bad bytes with U+FFFD and hand the flow text the client never sent.
  if (!isUtf8(buf)) throw httpErrors.notUtf8();
  try {
    return JSON.parse(buf.toString("utf8")) as unknown;
  } catch (e) {
    throw httpErrors.malformedJson(e instanceof Error ? e.message : String(e));
  }
}
