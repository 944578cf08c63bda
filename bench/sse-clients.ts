/** Client side of bench/sse-streams.ts: N SSE connections to one tape; prints, per event, when its last client got it. */
import { request } from "node:http";
import { createParser } from "eventsource-parser";

const port = Number(process.env.PORT);
const n = Number(process.env.STREAMS);
const wall = (): number => performance.timeOrigin + performance.now();
const got = new Map<string, { count: number; t: number }>();
let open = 0;
let errors = 0;
setInterval(() => errors > 0 && process.stderr.write(`${errors} client errors\n`), 5_000).unref();
for (let c = 0; c < n; c++) {
  const req = request({ host: "127.0.0.1", port, path: "/feed", agent: false }, (res) => {
    open++;
    if (open === n) process.stdout.write("open\n");
    const parser = createParser({
      onEvent: (e) => {
        const { i, t } = JSON.parse(e.data) as { i: number; t: number };
        if (i < 0) return; // history marker
        const g = got.get(e.id!) ?? { count: 0, t };
        g.count++;
        got.set(e.id!, g);
        if (g.count === n) process.stdout.write(`${i} ${wall() - g.t}\n`);
      },
    });
    res.setEncoding("utf8");
    res.on("data", (d: string) => parser.feed(d));
  });
  req.on("error", () => void errors++);
  req.end();
  // Paced: a burst of thousands of SYNs overflows the listen backlog.
  if (c % 100 === 99) await new Promise((r) => setTimeout(r, 30));
}
