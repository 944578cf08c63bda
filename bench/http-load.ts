/**
 * A keep-alive HTTP load generator on raw sockets (like autocannon: N
 * connections per target, one request in flight on each). It parses only the
 * status line and Content-Length, so it stays cheaper than the servers it
 * measures.
 *
 * With several targets it drives them in alternating segments (only one target
 * is loaded at a time, the others sit idle on their open connections), so a
 * burst of load from elsewhere on the machine hits every target alike.
 *
 *   node --import tsx bench/http-load.ts '{"ports":[6530,6531],"method":"GET","path":"/item",
 *     "connections":32,"seconds":20,"segmentMs":500,"warmup":2}'
 *
 * Sends "start" / "end" over IPC around the measured window (the bench samples
 * the servers' CPU time then) and prints one JSON line: one result per port.
 */
import { connect, type Socket } from "node:net";

interface LoadOptions {
  ports: number[];
  method: string;
  path: string;
  body?: string;
  connections: number;
  seconds: number;
  segmentMs: number;
  warmup: number;
}

interface Target {
  port: number;
  request: Buffer;
  /** Connections waiting for their target's next segment. */
  parked: Array<() => void>;
  requests: number;
  errors: number;
  activeMs: number;
  latencies: number[];
}

const opts = JSON.parse(process.argv[2] ?? "{}") as LoadOptions;
const body = opts.body ?? "";
const targets: Target[] = opts.ports.map((port) => ({
  port,
  request: Buffer.from(
    `${opts.method} ${opts.path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: keep-alive\r\n` +
      (opts.body === undefined
        ? ""
        : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`) +
      "\r\n" +
      body,
  ),
  parked: [],
  requests: 0,
  errors: 0,
  activeMs: 0,
  latencies: [],
}));

let active = 0;
let measuring = false;
let stopped = false;
const HEADER_END = Buffer.from("\r\n\r\n");
const LENGTH = /\r\ncontent-length:\s*(\d+)/i;

function drive(target: Target, socket: Socket): void {
  let pending: Buffer = Buffer.alloc(0);
  let sentAt = 0n;
  const send = (): void => {
    if (stopped) return void socket.end();
    if (targets[active] !== target) return void target.parked.push(send);
    sentAt = process.hrtime.bigint();
    socket.write(target.request);
  };
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      const end = pending.indexOf(HEADER_END);
      if (end === -1) return;
      const head = pending.toString("latin1", 0, end);
      const total = end + 4 + Number(LENGTH.exec(head)?.[1] ?? 0);
      if (pending.length < total) return;
      const status = Number(head.slice(9, 12));
      pending = pending.subarray(total);
      if (measuring && targets[active] === target) {
        target.requests++;
        if (status !== 200) target.errors++;
        target.latencies.push(Number(process.hrtime.bigint() - sentAt) / 1e6);
      }
      send();
    }
  });
  socket.on("error", () => target.errors++);
  socket.setNoDelay(true);
  send();
}

for (const target of targets) {
  for (let i = 0; i < opts.connections; i++) drive(target, connect(target.port, "127.0.0.1"));
}

let segmentStart = performance.now();
const rotate = setInterval(() => {
  const now = performance.now();
  if (measuring) targets[active]!.activeMs += now - segmentStart;
  segmentStart = now;
  active = (active + 1) % targets.length;
  for (const resume of targets[active]!.parked.splice(0)) resume();
}, opts.segmentMs);

await new Promise((r) => setTimeout(r, opts.warmup * 1000));
process.send?.("start");
measuring = true;
segmentStart = performance.now();
await new Promise((r) => setTimeout(r, opts.seconds * 1000));
targets[active]!.activeMs += performance.now() - segmentStart;
measuring = false;
process.send?.("end");
stopped = true;
clearInterval(rotate);

const pct = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
const results = targets.map((t) => {
  t.latencies.sort((a, b) => a - b);
  return {
    port: t.port,
    requests: t.requests,
    rps: Math.round(t.requests / (t.activeMs / 1000)),
    errors: t.errors,
    p50Ms: +pct(t.latencies, 0.5).toFixed(2),
    p99Ms: +pct(t.latencies, 0.99).toFixed(2),
  };
});
process.stdout.write(`${JSON.stringify(results)}\n`);
process.exit(0);
