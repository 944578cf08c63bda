// Fields the input schema asks for that the request does not carry: the 422 OKE1422's fix says where to send them, and names the path's parameters (one may be the field under another name).
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { App } from "../index.ts";
import { createApp, flow, http, on } from "../index.ts";

interface Envelope {
  ok: boolean;
  error?: { code: string; message: string; fix?: string; details?: Array<{ path: string; message: string }> };
}

// The path says :id, the schema asks for noteId: the request can never satisfy it.
const note = on(
  http.get("/notes/:id"),
  flow("notes.get", { in: z.object({ noteId: z.string() }), do: ({ noteId }) => ({ noteId }) }),
);
// Path and schema agree; a query field is missing.
const search = on(
  http.get("/users/:id/search"),
  flow("users.search", { in: z.object({ id: z.string(), q: z.string() }), do: (input) => input }),
);
// The field the schema asks for is in the body: present, only of the wrong type, no such fix either.
const rename = on(
  http.put("/users/:id"),
  flow("users.rename", { in: z.object({ id: z.string(), name: z.string() }), do: (input) => input }),
);

let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

describe("a path parameter the input schema does not know", () => {
  it("answers 422 OKE1422 with the validator's words and a fix naming the parameter and the missing field", async () => {
    app = createApp({
      env: "prod",
      modules: [{ note, search, rename }],
      config: { drivers: { journal: "memory" } },
    });
    await app.boot();
    const res = await app.request("/notes/abc");
    expect(res.status).toBe(422);
    const body = (await res.json()) as Envelope;
    expect(body.error).toMatchObject({
      code: "OKE1422",
      message: expect.stringContaining('Flow "notes.get": input does not match its schema: noteId:'),
      fix:
        'The request carries no "noteId"; this route\'s path (GET /notes/:id) gives "id": if it is meant to be the same field, ' +
        "give them the same name (the file's [name] or :name, or the schema's field). Otherwise send it in the query string.",
      details: [expect.objectContaining({ path: "noteId" })],
    });

    // A query field left out: the fix says where it goes (and the path parameter is named all the same).
    const query = (await (await app.request("/users/u1/search")).json()) as Envelope;
    expect(query.error?.code).toBe("OKE1422");
    expect(query.error?.fix).toMatch(
      /^The request carries no "q"; .+ Otherwise send it in the query string\.$/,
    );
    const typed = await app.request("/users/u1", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: 7 }),
    });
    const wrongType = (await typed.json()) as Envelope;
    expect([typed.status, wrongType.error?.code, wrongType.error?.fix]).toEqual([422, "OKE1422", undefined]);
  });
});
