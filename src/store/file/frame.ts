/** Log frames of the file driver: length, crc32 and JSON payload. */
import * as zlib from "node:zlib";

/**
 * Log frames: `u32 length | u32 crc32 | payload`, little endian, payload = the
 * UTF-8 JSON of one record. The crc covers the length bytes and the payload, so
 * a torn tail or a flipped bit stops recovery at the last intact record.
 */
export const FRAME_HEADER_BYTES = 8;
/** A length beyond this is damage, not a record (the biggest batch we write is far smaller). */
const MAX_FRAME_BYTES = 256 * 1024 * 1024;

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** Table CRC-32 (IEEE), same result as zlib.crc32; used where Node < 20.15 lacks it. */
export function tableCrc32(data: Uint8Array, value = 0): number {
  let c = ~value >>> 0;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

// zlib.crc32 exists from Node 20.15 / 22.2; the namespace lookup is undefined before that.
const nativeCrc32 = (zlib as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;
export const crc32: (data: Uint8Array, value?: number) => number = nativeCrc32 ?? tableCrc32;

/** Encodes one record; JSON.stringify runs now, so later mutation of `record` cannot leak in. */
export function encodeFrame(record: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(record), "utf8");
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload, crc32(frame.subarray(0, 4))), 4);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

export type StopReason = "end" | "torn" | "checksum" | "json";

export interface DecodedFrames {
  records: unknown[];
  /** Offset just past the last intact frame: everything after it is discarded. */
  end: number;
  stop: StopReason;
}

/** Decodes frames from `start` until the end of `buf` or the first damaged frame. */
export function decodeFrames(buf: Buffer, start = 0, limit = Infinity): DecodedFrames {
  const records: unknown[] = [];
  let at = start;
  while (at < buf.length && records.length < limit) {
    if (buf.length - at < FRAME_HEADER_BYTES) return { records, end: at, stop: "torn" };
    const length = buf.readUInt32LE(at);
    if (length === 0 || length > MAX_FRAME_BYTES) return { records, end: at, stop: "checksum" };
    const bodyAt = at + FRAME_HEADER_BYTES;
    if (buf.length - bodyAt < length) return { records, end: at, stop: "torn" };
    const payload = buf.subarray(bodyAt, bodyAt + length);
    if (crc32(payload, crc32(buf.subarray(at, at + 4))) !== buf.readUInt32LE(at + 4)) {
      return { records, end: at, stop: "checksum" };
    }
    try {
      records.push(JSON.parse(payload.toString("utf8")));
    } catch {
      return { records, end: at, stop: "json" };
    }
    at = bodyAt + length;
  }
  return { records, end: at, stop: "end" };
}

/** True when a complete frame with a valid checksum starts at `at` (its payload may still not parse). */
export function validFrameAt(buf: Buffer, at: number): boolean {
  if (buf.length - at < FRAME_HEADER_BYTES) return false;
  const length = buf.readUInt32LE(at);
  if (length === 0 || length > MAX_FRAME_BYTES || buf.length - at - FRAME_HEADER_BYTES < length) return false;
  const payload = buf.subarray(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + length);
  return crc32(payload, crc32(buf.subarray(at, at + 4))) === buf.readUInt32LE(at + 4);
}

/**
 * Offset of the first valid frame after `from`, or -1. Tells mid-log damage
 * (valid records follow) from a torn tail (nothing valid follows). Linear in
 * practice: payloads are JSON text, so a length read from inside one is at
 * least 0x20202020, beyond MAX_FRAME_BYTES, and rejected without a checksum.
 */
export function nextValidFrame(buf: Buffer, from: number): number {
  for (let at = from + 1; at + FRAME_HEADER_BYTES < buf.length; at++) if (validFrameAt(buf, at)) return at;
  return -1;
}
