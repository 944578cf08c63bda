// A keyed durable request still in flight at the shutdown deadline: answered 503 OKE1505 over the socket; a retry on another instance gets the run's outcome, never the 503.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow, http, on } from "../../src/index.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

interface Envelope {
  ok: boolean;
  data?: { ref: string; runId: string };
  error?: { code: string; message: string; fix?: string };
}

describe.each(drivers)("the shutdown deadline on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("answers a keyed durable request 503 OKE1505 with Retry-After; the retry elsewhere gets the run's outcome, stored", async () => {
    const hold = gate();
    let steps = 0;
    const book = on(
      http.post("/bookings"),
      flow("bookings.create", {
        durable: true,
        in: z.object({ sku: z.string() }),
        do: async ({ sku }, fx) => {
          // The first attempt's step outlives its instance's shutdown deadline; the next one does not.
          const ref = await fx.step("reserve", async () => {
            if (++steps === 1) await hold.promise;
            return `ref-${sku}`;
          });
          return { ref, runId: fx.runId };
        },
      }),
    );
    const store = await apps.store();
    // Each instance on its own clock: the stopped one's attempt goes on in this process (as it would
    // until its process exits), and must not renew its lease when the other's time moves.
    const a = await apps.make([{ book }], { store, time: createTimeTravel(1_000_000), boot: false });
    const b = await apps.make([{ book }], { store, time: createTimeTravel(1_000_000) });
    const { port } = await a.start({ port: 0, host: "127.0.0.1" });
    const request = {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": "booking-1" },
      body: JSON.stringify({ sku: "x" }),
    };
    try {
      const first = fetch(`http://127.0.0.1:${port}/bookings`, request);
      await until(() => steps === 1, "the first attempt's step");
      await a.stop({ timeoutMs: 50 });
      const res = await first;
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("2");
      const body = (await res.json()) as Envelope;
      expect(body.error?.code).toBe("OKE1505");
      expect(body.error?.message).toContain("the run is not lost: another instance continues it");
      expect(body.error?.fix).toContain(
        "Retry with the same Idempotency-Key: the retry answers with the run's outcome",
      );

      // The key's lock lapsed at the deadline: the retry takes the request over at once. The run is
      // still leased by the stopped instance's attempt, so it is refused for now — never the 503.
      const early = await b.request("/bookings", request);
      expect(early.status).toBe(409);
      expect(((await early.json()) as Envelope).error?.code).not.toBe("OKE1505");

      // Past the run's lease another instance finishes it; the retry answers with its outcome.
      b.time.advance(60_000);
      let outcome: Response | undefined;
      let last = "";
      await until(async () => {
        outcome = await b.request("/bookings", request);
        if (outcome.status !== 200) last = `${outcome.status} ${await outcome.clone().text()}`;
        return outcome.status === 200;
      }, "the retry to answer with the run's outcome").catch((e: unknown) => {
        throw new Error(`${String(e)}: ${last}`);
      });
      const done = (await outcome!.json()) as Envelope;
      expect(done.data?.ref).toBe("ref-x");
      // One run: the retry's answer is the first request's run, and its step ran once more after the cut.
      expect(await store.getRun(done.data!.runId)).toMatchObject({ status: "completed" });
      expect(steps).toBe(2);
      // That outcome is the key's stored answer.
      const again = await b.request("/bookings", request);
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(((await again.json()) as Envelope).data).toEqual(done.data);
    } finally {
      hold.open();
    }
  });
});
