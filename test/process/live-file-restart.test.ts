// The file driver's live tapes across SIGKILL: an SSE client resumes with Last-Event-ID, no gap and no duplicate.
import { request, type IncomingMessage } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { Child } from "./spawn.ts";

const CHILD = fileURLToPath(new URL("./live-file-child.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "oke-live-file-"));
const children: Child[] = [];

afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) await c.kill();
  rmSync(dir, { recursive: true, force: true });
});

const spawnChild = async (): Promise<{ child: Child; port: number }> => {
  const child = new Child({ OKE_FILE_DIR: dir }, CHILD);
  children.push(child);
  const ready = await child.waitFor((e) => e.event === "ready", "ready");
  return { child, port: ready.port as number };
};

const post = async (port: number, state: string): Promise<void> => {
  const r = await fetch(`http://127.0.0.1:${port}/orders/o7/status`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ state }),
  });
  expect(r.status).toBe(204);
};

interface Seen {
  id: number;
  state: string;
}

/** A minimal EventSource: parses `id:` / `data:` events; `lastId` is what it would send on reconnect. */
class SseClient {
  readonly seen: Seen[] = [];
  ended: Promise<void>;
  private res: IncomingMessage | undefined;
  private waiters: Array<() => void> = [];

  constructor(port: number, lastId: number | undefined) {
    this.ended = new Promise<void>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/orders/o7/status",
          headers: lastId === undefined ? {} : { "last-event-id": String(lastId) },
        },
        (res) => {
          this.res = res;
          expect(res.statusCode).toBe(200);
          let buf = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            buf += chunk;
            let at: number;
            while ((at = buf.indexOf("\n\n")) !== -1) {
              const block = buf.slice(0, at);
              buf = buf.slice(at + 2);
              let id: number | undefined;
              let data: string | undefined;
              for (const line of block.split("\n")) {
                if (line.startsWith("id: ")) id = Number(line.slice(4));
                else if (line.startsWith("data: ")) data = line.slice(6);
              }
              if (id !== undefined && data !== undefined) {
                this.seen.push({ id, state: (JSON.parse(data) as { state: string }).state });
                for (const w of this.waiters.splice(0)) w();
              }
            }
          });
          res.on("close", () => resolve());
          res.on("error", () => resolve());
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  async waitFor(n: number): Promise<void> {
    const end = Date.now() + 30_000;
    while (this.seen.length < n) {
      if (Date.now() > end) throw new Error(`SSE: ${this.seen.length} of ${n} events`);
      await Promise.race([
        new Promise<void>((r) => this.waiters.push(r)),
        new Promise((r) => setTimeout(r, 200)),
      ]);
    }
  }

  close(): void {
    this.res?.destroy();
  }
}

describe("live tapes on the file driver survive SIGKILL", () => {
  it("an SSE client resuming with Last-Event-ID after each SIGKILL gets what it missed: every acknowledged entry once, in order", async () => {
    let { child, port } = await spawnChild();
    const posted: string[] = [];
    const emit = async (state: string): Promise<void> => {
      await post(port, state);
      posted.push(state);
    };
    await emit("placed");
    await emit("paid");
    const seen: Seen[] = [];
    let client = new SseClient(port, undefined);
    await client.waitFor(2);

    for (let round = 0; round < 3; round++) {
      // Counted before the emit: the event can reach the client before the POST's answer does.
      const before = client.seen.length;
      await emit(`live ${round}`);
      await client.waitFor(before + 1);
      // The browser goes away; an entry is acknowledged while it is gone, then the server is killed.
      client.close();
      await client.ended;
      seen.push(...client.seen);
      await emit(`acked ${round}`);
      child.proc.kill("SIGKILL");
      await child.exited;

      ({ child, port } = await spawnChild());
      await emit(`after restart ${round}`);
      client = new SseClient(port, seen.at(-1)!.id);
      await client.waitFor(2);
      expect(client.seen.map((e) => e.state)).toEqual([`acked ${round}`, `after restart ${round}`]);
    }
    await emit("delivered");
    await client.waitFor(3);
    seen.push(...client.seen);
    client.close();
    // A new browser without Last-Event-ID gets the whole retained tape, as written before the kills.
    const fresh = new SseClient(port, undefined);
    await fresh.waitFor(posted.length);
    fresh.close();
    expect(fresh.seen).toEqual(seen);

    expect(seen.map((s) => s.state)).toEqual(posted);
    const ids = seen.map((s) => s.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });
});
