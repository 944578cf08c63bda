// An Idempotency-Key survives a SIGKILLed process on postgres: the next process replays the first response.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { Child } from "./spawn.ts";

// An Idempotency-Key outlives its process: a retry sent to a new process on the same PostgreSQL
// schema gets the first answer, and the flow ran once.

const SCRIPT = fileURLToPath(new URL("./idempotent-child.ts", import.meta.url));
const schema = `oke_idem_${process.pid}`;
const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });

beforeAll(async () => {
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open(); // migrations, so the child finds the schema
  await store.close();
  await admin.query(
    `CREATE TABLE "${schema}".orders (order_id text PRIMARY KEY, sku text NOT NULL, pid int NOT NULL)`,
  );
});
afterAll(async () => {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

const start = async (env: Record<string, string> = {}): Promise<{ child: Child; url: string }> => {
  const child = new Child({ DATABASE_URL: TEST_DATABASE_URL, OKE_SCHEMA: schema, ...env }, SCRIPT);
  const e = await child.waitFor((ev) => ev.event === "listening", "listening");
  return { child, url: `http://127.0.0.1:${String(e.port)}/orders` };
};
const keyed = (key: string, sku: string): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", "idempotency-key": key },
  body: JSON.stringify({ sku }),
});

describe("Idempotency-Key across a process restart (PostgreSQL)", () => {
  it("a retry to the next process is answered from the first response; the flow ran once", async () => {
    const a = await start();
    const first = await fetch(a.url, keyed("order-key-1", "sku-1"));
    expect(first.status).toBe(200);
    const firstBody = await first.text();
    // The answer goes out before its completion is stored (it rides with the next claims, or alone
    // after PARK_MS): this case is a stored key outliving its process, so the kill waits for the
    // record. A kill inside that window is the next case's subject.
    for (let i = 0; i < 5_000; i++) {
      const { rows } = await admin.query<{ status: string }>(
        `SELECT status FROM "${schema}".idempotency_keys WHERE key = 'order-key-1'`,
      );
      if (rows[0]?.status === "done") break;
      await new Promise((r) => setTimeout(r, 2));
    }
    await a.child.kill("SIGKILL");

    const b = await start();
    try {
      const retry = await fetch(b.url, keyed("order-key-1", "sku-1"));
      expect(retry.status).toBe(200);
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(await retry.text()).toBe(firstBody);
      expect((await fetch(b.url, keyed("order-key-1", "sku-2"))).status).toBe(422);
      // A new key runs in the new process.
      const next = (await (await fetch(b.url, keyed("order-key-2", "sku-1"))).json()) as {
        data: { pid: number };
      };
      expect(next.data.pid).toBe(b.child.proc.pid);
      const { rows } = await admin.query<{ c: string }>(`SELECT count(*)::text AS c FROM "${schema}".orders`);
      expect(rows[0]!.c).toBe("2");
    } finally {
      await b.child.kill("SIGKILL");
    }
  });

  it("an answer goes out before its completion is stored: its process replays it, SIGTERM stores it before exiting, another process then replays it", async () => {
    const lockId = 7_000 + (process.pid % 1_000);
    const gate = new pg.Client({ connectionString: TEST_DATABASE_URL });
    const holder = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await gate.connect();
    await holder.connect();
    await gate.query("SELECT pg_advisory_lock($1)", [lockId]);
    const a = await start({ OKE_GATE_LOCK: String(lockId), OKE_REPORT_KEY: "gated-key-1" });
    const b = await start();
    const urlA = a.url.replace("/orders", "/gated-orders");
    const urlB = b.url.replace("/orders", "/gated-orders");
    const record = async () =>
      (
        await admin.query<{ status: string; response_body: string | null }>(
          `SELECT status, response_body FROM "${schema}".idempotency_keys WHERE key = 'gated-key-1'`,
        )
      ).rows[0];
    try {
      const answering = fetch(urlA, keyed("gated-key-1", "sku-g"));
      // The claim is in (the flow waits for the gate): hold the key's row so its completion waits.
      for (let i = 0; i < 2_000 && (await record()) === undefined; i++)
        await new Promise((r) => setImmediate(r));
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".idempotency_keys WHERE key = 'gated-key-1' FOR UPDATE`);
      await gate.query("SELECT pg_advisory_unlock($1)", [lockId]);
      // Before the change this waited for the completion, i.e. for the row held above.
      const first = await answering;
      expect(first.status).toBe(200);
      const body = await first.text();
      expect((await record())?.status).toBe("running");
      const here = await fetch(urlA, keyed("gated-key-1", "sku-g"));
      expect(here.headers.get("idempotent-replayed")).toBe("true");
      expect(await here.text()).toBe(body);
      // (Another instance would find the key running, 409 — not asked here: its claim's
      // INSERT … ON CONFLICT would wait for the row held above. The conformance case asks it.)

      const stopped = a.child.waitFor((ev) => ev.event === "stopped", "stopped");
      a.child.proc.kill("SIGTERM");
      // The server stops listening first; stop() then waits for the completion, which waits for the row.
      for (let i = 0; i < 2_000; i++) {
        const refused = await fetch(a.url, { method: "GET" }).then(
          () => false,
          () => true,
        );
        if (refused) break;
      }
      expect(a.child.dead).toBe(false);
      expect((await record())?.status).toBe("running");
      await holder.query("COMMIT");
      // stop() returned only once the answer was stored.
      expect((await stopped).status).toBe("done");
      expect(await a.child.exited).toBe(0);
      expect(await record()).toEqual({ status: "done", response_body: body });
      const after = await fetch(urlB, keyed("gated-key-1", "sku-g"));
      expect(after.headers.get("idempotent-replayed")).toBe("true");
      expect(await after.text()).toBe(body);
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      await b.child.kill("SIGKILL");
      if (!a.child.dead) await a.child.kill("SIGKILL");
      await gate.end();
      await holder.end();
    }
  });

  it("a process killed between the claim and the answer: the retry on the next process continues the same durable run; its step ran once", async () => {
    const a = await start({ OKE_HANG: "1" });
    const durableUrl = a.url.replace("/orders", "/durable-orders");
    // The first attempt never gets an answer: its process dies in the run's second step.
    const lost = fetch(durableUrl, keyed("durable-key-1", "sku-d")).catch(() => undefined);
    const hanging = await a.child.waitFor((ev) => ev.event === "hanging", "hanging");
    await a.child.kill("SIGKILL");
    await lost;

    // 30 s later (the lock's and the lease's length), as far as the store can tell.
    await admin.query(`UPDATE "${schema}".idempotency_keys SET locked_until = 0 WHERE key = 'durable-key-1'`);
    await admin.query(`UPDATE "${schema}".runs SET lease_expires_at = 0 WHERE id = $1`, [hanging.runId]);
    // Its log on stderr, reported if the retry never gets its answer.
    const b = await start({ OKE_LOG_LEVEL: "debug" });
    try {
      const url = b.url.replace("/orders", "/durable-orders");
      // Its orphan scan may be finishing the run at this moment: a 409 (the run leased by the scan;
      // the key is freed, not answered with it) then means "ask again" — a pause between tries so
      // the scan gets the machine, however loaded.
      // Each 409's code (OKE1442: the key locked; JournalLeaseBusy's: the run leased), so a failure says which.
      const refusals = new Map<string, number>();
      let retry = await fetch(url, keyed("durable-key-1", "sku-d"));
      for (let i = 0; i < 500 && retry.status === 409; i++) {
        const code = ((await retry.json()) as { error?: { code?: string } }).error?.code ?? "?";
        refusals.set(code, (refusals.get(code) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 20));
        retry = await fetch(url, keyed("durable-key-1", "sku-d"));
      }
      if (retry.status !== 200) {
        const key = await admin.query(
          `SELECT status, locked_until, run_id FROM "${schema}".idempotency_keys WHERE key = 'durable-key-1'`,
        );
        const run = await admin.query(
          `SELECT status, lease_owner, lease_expires_at FROM "${schema}".runs WHERE id = $1`,
          [hanging.runId],
        );
        expect.fail(
          `retry ${String(retry.status)} after ${JSON.stringify([...refusals])} at ${String(Date.now())}; key ${JSON.stringify(key.rows)}; run ${JSON.stringify(run.rows)}; B's stderr: ${b.child.stderr.slice(-4_000)}`,
        );
      }
      const answer = await retry.text();
      expect(JSON.parse(answer)).toMatchObject({ data: { orderId: hanging.runId } });
      const { rows } = await admin.query<{ order_id: string; pid: number }>(
        `SELECT order_id, pid FROM "${schema}".orders WHERE sku = 'sku-d'`,
      );
      // Never twice (the journaled step did not run again), never lost (the run finished).
      expect(rows).toEqual([{ order_id: hanging.runId, pid: a.child.proc.pid }]);
      const again = await fetch(url, keyed("durable-key-1", "sku-d"));
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await again.text()).toBe(answer);
    } finally {
      await b.child.kill("SIGKILL");
    }
  });
});
