// Broadcast across real processes on postgres: each flow runs each event exactly once.
import { fileURLToPath } from "node:url";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import { broadcastQueue } from "../../src/signal/broadcast-runtime.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { useFleet } from "./fleet.ts";
import type { Child } from "./spawn.ts";

const CHILD = fileURLToPath(new URL("./fanout-child.ts", import.meta.url));
const fleet = useFleet({
  schema: `oke_fanout_${process.pid}`,
  script: CHILD,
  tables: [
    `CREATE TABLE $S.fanout_runs (id bigserial PRIMARY KEY, flow text NOT NULL, event text NOT NULL, pid int NOT NULL)`,
  ],
});
const { schema } = fleet;
const spawnChild = (): Child => fleet.spawn();
const portOf = async (c: Child): Promise<number> =>
  (await c.waitFor((e) => e.event === "ready", "ready")).port as number;

describe.sequential("broadcast across real processes on one PostgreSQL", () => {
  it("two instances, two flows, emits on both: each flow ran each event exactly once", async () => {
    const a = spawnChild();
    const b = spawnChild();
    const [pa, pb] = await Promise.all([portOf(a), portOf(b)]);
    const N = 40;
    const emit = (port: number, ids: string[]) =>
      fetch(`http://127.0.0.1:${port}/emit`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ids }),
      }).then((r) => expect(r.status).toBe(204));
    const ids = Array.from({ length: N }, (_, i) => `e${i}`);
    await Promise.all([
      emit(
        pa,
        ids.filter((_, i) => i % 2 === 0),
      ),
      emit(
        pb,
        ids.filter((_, i) => i % 2 === 1),
      ),
    ]);
    const end = Date.now() + 30_000;
    let rows: Array<{ flow: string; event: string; pid: number }> = [];
    while (Date.now() < end) {
      rows = (
        await fleet.query<{ flow: string; event: string; pid: number }>(
          `SELECT flow, event, pid FROM "${schema}".fanout_runs`,
        )
      ).rows;
      if (rows.length >= 2 * N) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // No copy left to run (pending or inflight): nothing can run again after this read.
    const store = createPostgresStore({ connectionString: fleet.url(), schema });
    await store.open();
    for (const f of ["orders.charge", "orders.ship"]) {
      const st = await store.stats(broadcastQueue("orders.placed", f), Date.now());
      expect(st).toMatchObject({ pending: 0, inflight: 0, delivered: N });
    }
    await store.close();
    rows = (
      await fleet.query<{ flow: string; event: string; pid: number }>(
        `SELECT flow, event, pid FROM "${schema}".fanout_runs`,
      )
    ).rows;
    const runs = rows.map((r) => `${r.flow} ${r.event}`).sort();
    const expected = ids.flatMap((id) => [`orders.charge ${id}`, `orders.ship ${id}`]).sort();
    expect(runs).toEqual(expected);
    a.proc.kill("SIGTERM");
    b.proc.kill("SIGTERM");
    await Promise.all([a.exited, b.exited]);
  });

  it("an SSE client on instance B sees emits made on instance A, in order, with no gap on resume", async () => {
    const a = spawnChild();
    const b = spawnChild();
    const [pa, pb] = await Promise.all([portOf(a), portOf(b)]);
    const post = (port: number, state: string) =>
      fetch(`http://127.0.0.1:${port}/orders/o7/status`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ state }),
      }).then((r) => expect(r.status).toBe(204));
    await post(pa, "placed");
    const events: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (e) => void events.push(e) });
    const ac = new AbortController();
    const res = await fetch(`http://127.0.0.1:${pb}/orders/o7/status`, { signal: ac.signal });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body!) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
    })().catch(() => undefined);
    const waitFor = async (n: number) => {
      const end = Date.now() + 15_000;
      while (events.length < n) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${n} SSE events, got ${events.length}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    await waitFor(1);
    for (const state of ["paid", "packed", "shipped"]) await post(pa, state);
    await waitFor(4);
    ac.abort();
    await reading;
    expect(events.map((e) => (JSON.parse(e.data) as { state: string }).state)).toEqual([
      "placed",
      "paid",
      "packed",
      "shipped",
    ]);
    // Resume on A from the second entry: exactly the two after it.
    const again = await fetch(`http://127.0.0.1:${pa}/orders/o7/status`, {
      headers: { "last-event-id": events[1]!.id! },
    });
    const more: EventSourceMessage[] = [];
    const p2 = createParser({ onEvent: (e) => void more.push(e) });
    const decoder = new TextDecoder();
    for await (const chunk of again.body!) {
      p2.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
      if (more.length >= 2) break;
    }
    expect(more.map((e) => e.id)).toEqual([events[2]!.id, events[3]!.id]);
    a.proc.kill("SIGTERM");
    b.proc.kill("SIGTERM");
    await Promise.all([a.exited, b.exited]);
  });
});
