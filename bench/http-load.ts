/**
 * A keep-alive HTTP load generator on raw sockets (like autocannon: N
 * connections, one request in flight on each). It parses only the status line
 * and Content-Length, so it stays cheaper than the server it measures.
 *
 *   node --import tsx bench/http-load.ts '{"port":6530,"method":"GET","path":"/item","connections":32,"seconds":8,"warmup":2}'
 *
 * Prints one JSON line: { requests, rps, errors, p50Ms, p99Ms }.
 */
import { connect, type Socket } from "node:net";

interface LoadOptions {
  port: number;
  method: string;
  path: string;
  body?: string;
  connections: number;
  seconds: number;
  warmup: number;
}

const opts = JSON.parse(process.argv[2] ?? "{}") as LoadOptions;
const body = opts.body === undefined ? "" : opts.body;
const head =
  `${opts.method} ${opts.path} HTTP/1.1\r\nhost: 127.0.0.1:${opts.port}\r\nconnection: keep-alive\r\n` +
  (opts.body === undefined
    ? ""
    : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`) +
  "\r\n";
const request = Buffer.from(head + body);

let measuring = false;
let stopped = false;
let requests = 0;
let errors = 0;
const latencies: number[] = [];
const HEADER_END = Buffer.from("\r\n\r\n");
const LENGTH = /\r\ncontent-length:\s*(\d+)/i;

function drive(socket: Socket): void {
  let pending: Buffer = Buffer.alloc(0);
  let sentAt = 0n;
  const send = (): void => {
    if (stopped) return void socket.end();
    sentAt = process.hrtime.bigint();
    socket.write(request);
  };
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      const end = pending.indexOf(HEADER_END);
      if (end === -1) return;
      const headText = pending.toString("latin1", 0, end);
      const length = Number(LENGTH.exec(headText)?.[1] ?? 0);
      const total = end + 4 + length;
      if (pending.length < total) return;
      const status = Number(headText.slice(9, 12));
      pending = pending.subarray(total);
      if (measuring) {
        requests++;
        if (status !== 200) errors++;
        latencies.push(Number(process.hrtime.bigint() - sentAt) / 1e6);
      }
      send();
    }
  });
  socket.on("error", () => {
    if (measuring) errors++;
  });
  socket.setNoDelay(true);
  send();
}

for (let i = 0; i < opts.connections; i++) drive(connect(opts.port, "127.0.0.1"));
await new Promise((r) => setTimeout(r, opts.warmup * 1000));
// Marks for the bench, which samples the server's CPU time at the same moments.
process.send?.("start");
measuring = true;
const t0 = process.hrtime.bigint();
await new Promise((r) => setTimeout(r, opts.seconds * 1000));
measuring = false;
process.send?.("end");
stopped = true;
const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
latencies.sort((a, b) => a - b);
const pct = (p: number): number =>
  latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
process.stdout.write(
  `${JSON.stringify({ requests, rps: Math.round(requests / elapsed), errors, p50Ms: +pct(0.5).toFixed(2), p99Ms: +pct(0.99).toFixed(2) })}\n`,
);
process.exit(0);
