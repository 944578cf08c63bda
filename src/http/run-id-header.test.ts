// The oke-run-id header: every answer of a durable route whose run exists names it, over app.request() and a real socket.
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { App } from "../index.ts";
import { createApp, flow, http, on, OkeError } from "../index.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { RUN_ID_HEADER } from "./envelope.ts";
import { fingerprintOf } from "./idempotency.ts";

const post = (body: unknown, key?: string): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
  body: JSON.stringify(body),
});

/** Holds the "orders.slow" flow until opened. */
const gate = () => {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
};

const makeModules = (slow: { started: () => void; release: Promise<void> }) => [
  {
    exports: {
      quote: on(
        http.post("/quotes"),
        flow("quotes.create", {
          durable: true,
          in: z.object({ sku: z.string() }),
          do: async ({ sku }, fx) => ({ sku, price: await fx.step("price", () => 12) }),
        }),
      ),
      trial: on(
        http.post("/trials/start"),
        flow("trials.start", {
          durable: true,
          do: async (_input: unknown, fx) => {
            await fx.clock.sleep("expiry-window", "3d");
          },
        }),
      ),
      charge: on(
        http.post("/charges"),
        flow("charges.create", {
          durable: true,
          do: async (_input: unknown, fx) => {
            await fx.step("charge", () => {
              throw new OkeError({ code: "APP402", status: 402, message: "card declined" });
            });
          },
        }),
      ),
      crash: on(
        http.post("/crash"),
        flow("crash.durable", {
          durable: true,
          do: async (_input: unknown, fx) => {
            await fx.step("explode", () => {
              throw new Error("boom");
            });
          },
        }),
      ),
      slow: on(
        http.post("/slow"),
        flow("orders.slow", {
          durable: true,
          do: async () => {
            slow.started();
            await slow.release;
            return { done: true };
          },
        }),
      ),
      plain: on(http.post("/plain"), flow("plain.echo", { do: (input: unknown) => input })),
      plainFail: on(
        http.post("/plain-fail"),
        flow("plain.fail", {
          do: () => {
            throw new Error("plain boom");
          },
        }),
      ),
    },
  },
];

let app: App | undefined;
afterEach(async () => {
  await app?.stop({ timeoutMs: 2_000 });
  app = undefined;
});

const boot = async (): Promise<{ app: App; slowStarted: Promise<void>; releaseSlow: () => void }> => {
  const started = gate();
  const release = gate();
  const time = createTimeTravel(1_000_000);
  app = createApp({
    env: "test",
    clock: time,
    modules: makeModules({ started: started.open, release: release.promise }),
  });
  await app.boot();
  return { app, slowStarted: started.promise, releaseSlow: release.open };
};

describe(`the ${RUN_ID_HEADER} header`, () => {
  it("names the run of a durable route's 200, 204 and failed answers (app.request); a plain flow gets none", async () => {
    const { app } = await boot();

    const ok = await app.request("/quotes", post({ sku: "a" }));
    expect(ok.status).toBe(200);
    const okRun = ok.headers.get(RUN_ID_HEADER);
    expect(okRun).toMatch(/^[0-9a-z]{26}$/);
    expect(await app.store.getRun(okRun!)).toMatchObject({
      flow: "quotes.create",
      status: "completed",
      output: { sku: "a", price: 12 },
    });

    const parked = await app.request("/trials/start", post({ email: "ada@example.com" }));
    expect(parked.status).toBe(204);
    const parkedRun = parked.headers.get(RUN_ID_HEADER);
    expect(parkedRun).not.toBeNull();
    expect(await app.store.getRun(parkedRun!)).toMatchObject({ flow: "trials.start", status: "sleeping" });

    const declined = await app.request("/charges", post({}));
    expect(declined.status).toBe(402);
    const declinedRun = declined.headers.get(RUN_ID_HEADER);
    expect(declinedRun).not.toBeNull();
    expect(await app.store.getRun(declinedRun!)).toMatchObject({ flow: "charges.create", status: "failed" });

    const crashed = await app.request("/crash", post({}));
    expect(crashed.status).toBe(500);
    const crashedRun = crashed.headers.get(RUN_ID_HEADER);
    expect(crashedRun).not.toBeNull();
    expect(await app.store.getRun(crashedRun!)).toMatchObject({ flow: "crash.durable", status: "failed" });

    expect(new Set([okRun, parkedRun, declinedRun, crashedRun]).size).toBe(4);

    // Refused before any run was created: nothing to name.
    const invalid = await app.request("/quotes", post({ sku: 1 }));
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get(RUN_ID_HEADER)).toBeNull();
    expect(await app.operator.runs({ flow: "quotes.create" })).toHaveLength(1);

    const plain = await app.request("/plain", post({ a: 1 }));
    expect(plain.status).toBe(200);
    expect(plain.headers.get(RUN_ID_HEADER)).toBeNull();
    const plainFailed = await app.request("/plain-fail", post({}));
    expect(plainFailed.status).toBe(500);
    expect(plainFailed.headers.get(RUN_ID_HEADER)).toBeNull();
    // A plain flow with an Idempotency-Key has a run id (fx.runId) but no durable run to name.
    const plainKeyed = await app.request("/plain", post({ a: 2 }, "plain-key"));
    expect(plainKeyed.headers.get(RUN_ID_HEADER)).toBeNull();
    const plainReplayed = await app.request("/plain", post({ a: 2 }, "plain-key"));
    expect(plainReplayed.headers.get("idempotent-replayed")).toBe("true");
    expect(plainReplayed.headers.get(RUN_ID_HEADER)).toBeNull();
  });

  it("with an Idempotency-Key: the key's run, on the answer, on its replay and on the 409 while it runs", async () => {
    const { app, slowStarted, releaseSlow } = await boot();

    const first = await app.request("/trials/start", post({ email: "a@x" }, "trial-key"));
    expect(first.status).toBe(204);
    const runId = first.headers.get(RUN_ID_HEADER);
    expect(runId).not.toBeNull();
    const replay = await app.request("/trials/start", post({ email: "a@x" }, "trial-key"));
    expect(replay.status).toBe(204);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.headers.get(RUN_ID_HEADER)).toBe(runId);
    expect(await app.operator.runs({ flow: "trials.start" })).toHaveLength(1);

    // A stored 4xx of a run that failed is replayed with its run; one of input refused before any
    // run existed is replayed without.
    const declined = await app.request("/charges", post({}, "charge-key"));
    expect(declined.status).toBe(402);
    const declinedRun = declined.headers.get(RUN_ID_HEADER);
    expect(declinedRun).not.toBeNull();
    const declinedAgain = await app.request("/charges", post({}, "charge-key"));
    expect(declinedAgain.headers.get("idempotent-replayed")).toBe("true");
    expect(declinedAgain.headers.get(RUN_ID_HEADER)).toBe(declinedRun);
    const invalid = await app.request("/quotes", post({ sku: 1 }, "quote-key"));
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get(RUN_ID_HEADER)).toBeNull();
    const invalidAgain = await app.request("/quotes", post({ sku: 1 }, "quote-key"));
    expect(invalidAgain.headers.get("idempotent-replayed")).toBe("true");
    expect(invalidAgain.headers.get(RUN_ID_HEADER)).toBeNull();

    // Still running: the 409 names the run the retry will answer with.
    const pending = app.request("/slow", post({}, "slow-key"));
    await slowStarted;
    const busy = await app.request("/slow", post({}, "slow-key"));
    expect(busy.status).toBe(409);
    expect(((await busy.json()) as { error: { code: string } }).error.code).toBe("OKE1442");
    const busyRun = busy.headers.get(RUN_ID_HEADER);
    expect(busyRun).not.toBeNull();
    releaseSlow();
    const done = await pending;
    expect(done.status).toBe(200);
    expect(done.headers.get(RUN_ID_HEADER)).toBe(busyRun);
  });

  it("a keyed retry whose run another instance holds: 409 JournalLeaseBusy names that run", async () => {
    const { app } = await boot();
    const now = app.clock.now();
    const body = { email: "b@x" };
    // What a dead request left: the key's record with its lock lapsed, and its run leased elsewhere.
    await app.store.startRun({
      id: "run-held-elsewhere",
      flow: "trials.start",
      input: body,
      parentRunId: null,
      owner: "other-instance/1",
      now,
      leaseMs: 60_000,
    });
    await app.store.claimIdempotencyKey({
      key: "held-key",
      fingerprint: fingerprintOf("POST", "/trials/start?{}", body),
      runId: "run-held-elsewhere",
      now,
      lockMs: 0,
      windowMs: 60_000,
    });
    const res = await app.request("/trials/start", post(body, "held-key"));
    expect(res.status).toBe(409);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("JournalLeaseBusy");
    expect(res.headers.get(RUN_ID_HEADER)).toBe("run-held-elsewhere");
  });

  it("is sent over a real socket before the body: 200, 204, a failed run; none for a plain flow", async () => {
    const { app } = await boot();
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${port}`;

    const ok = await fetch(`${base}/quotes`, post({ sku: "b" }));
    expect(ok.status).toBe(200);
    const okRun = ok.headers.get("oke-run-id"); // the documented name, spelled out once
    expect(await ok.json()).toEqual({ ok: true, data: { sku: "b", price: 12 } });
    expect(await app.store.getRun(okRun!)).toMatchObject({ status: "completed" });

    const parked = await fetch(`${base}/trials/start`, post({ email: "c@x" }));
    expect(parked.status).toBe(204);
    const parkedRun = parked.headers.get(RUN_ID_HEADER);
    expect(await app.store.getRun(parkedRun!)).toMatchObject({ status: "sleeping" });

    const crashed = await fetch(`${base}/crash`, post({}));
    expect(crashed.status).toBe(500);
    const crashedRun = crashed.headers.get(RUN_ID_HEADER);
    expect(await app.store.getRun(crashedRun!)).toMatchObject({ flow: "crash.durable", status: "failed" });

    const plain = await fetch(`${base}/plain`, post({ a: 1 }));
    expect(plain.status).toBe(200);
    expect(plain.headers.get(RUN_ID_HEADER)).toBeNull();
  });

  it("the shutdown deadline's 503 OKE1505 names the durable run another instance continues", async () => {
    const { app, slowStarted, releaseSlow } = await boot();
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const answer = fetch(`http://127.0.0.1:${port}/slow`, post({}));
    await slowStarted;
    // The flow is held at its gate: the deadline always comes first.
    const stopped = app.stop({ timeoutMs: 50 });
    const res = await answer;
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("OKE1505");
    const runId = res.headers.get(RUN_ID_HEADER);
    expect(await app.store.getRun(runId!)).toMatchObject({ flow: "orders.slow" });
    releaseSlow();
    await stopped;
  });
});
