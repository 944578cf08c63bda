// Names and HTTP paths derived from the file tree.
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { flow } from "../flow/flow.ts";
import { http } from "../flow/http-trigger.ts";
import { on } from "../flow/on.ts";
import { z } from "zod";
import { channel } from "../channel/channel.ts";
import { signal } from "../signal/signal.ts";
import { defaultFlowName, fileRoutePath, isRouteFile, namedParams, restParamOf } from "./file-routes.ts";
import { createApp } from "./app.ts";
import { buildRegistry } from "./manifest.ts";

const get = () => on(http.get(), flow({ do: () => "ok" }));
const post = () => on(http.post(), flow({ do: () => "ok" }));

const bootError = (fn: () => unknown): OkeError => {
  try {
    fn();
  } catch (e) {
    if (e instanceof OkeError) return e;
    throw e;
  }
  throw new Error("expected a boot error");
};

describe("routes from the file tree", () => {
  it("the leaves list, create, get, update, remove, index and route add no segment", () => {
    for (const leaf of ["list", "create", "get", "update", "remove", "index", "route"])
      expect(fileRoutePath(`src/flows/orders/${leaf}.ts`)).toBe("/orders");
    expect(fileRoutePath("src/flows/notes/[id]/get.ts")).toBe("/notes/:id");
    expect(fileRoutePath("src/flows/notes/[id]/remove.ts")).toBe("/notes/:id");
    expect(fileRoutePath("src/flows/index.ts")).toBe("/");
  });

  it("other leaves add their name", () => {
    expect(fileRoutePath("src/flows/trials/start.ts")).toBe("/trials/start");
    expect(fileRoutePath("src/flows/ops/email-dlq.ts")).toBe("/ops/email-dlq");
    expect(fileRoutePath("src/flows/hello.ts")).toBe("/hello");
  });

  it("a first folder named main adds no segment (only the first)", () => {
    expect(fileRoutePath("src/flows/main/route.ts")).toBe("/");
    expect(fileRoutePath("src/flows/main/health.ts")).toBe("/health");
    expect(fileRoutePath("src/flows/docs/main/route.ts")).toBe("/docs/main");
  });

  it("[id] is a parameter, [...slug] the rest of the path, (group) adds nothing", () => {
    expect(fileRoutePath("src/flows/users/[id]/edit.ts")).toBe("/users/:id/edit");
    expect(fileRoutePath("src/flows/users/[id].ts")).toBe("/users/:id");
    expect(fileRoutePath("src/flows/files/[...slug].ts")).toBe("/files/*");
    expect(fileRoutePath("src/flows/(admin)/stats.ts")).toBe("/stats");
    expect(fileRoutePath("src/flows/(admin)/main/list.ts")).toBe("/");
  });

  it("_-prefixed files and folders, shapes.ts, signals.ts and generated.ts are never routes", () => {
    for (const p of [
      "src/flows/orders/_helpers.ts",
      "src/flows/_internal/ping.ts",
      "src/flows/orders/shapes.ts",
      "src/flows/orders/signals.ts",
      "src/flows/generated.ts",
    ]) {
      expect(isRouteFile(p)).toBe(false);
      expect(fileRoutePath(p)).toBeUndefined();
    }
    expect(isRouteFile("src/flows/orders/shape.ts")).toBe(true);
    const e = bootError(() =>
      buildRegistry([{ path: "src/flows/orders/_helpers.ts", exports: { ping: get() } }]),
    );
    expect(e.code).toBe("OKE1079");
    expect(e.message).toContain("src/flows/orders/_helpers.ts#ping");
  });

  it("an explicit path wins over the tree, also in a file that is never a route", () => {
    const r = buildRegistry([
      {
        path: "src/flows/orders/create.ts",
        exports: { create: on(http.post("/checkout"), flow({ do: () => 1 })) },
      },
      { path: "src/flows/orders/_ping.ts", exports: { ping: on(http.get("/ping"), flow({ do: () => 1 })) } },
    ]);
    expect(r.manifest.routes).toEqual([
      { method: "POST", path: "/checkout", flow: "orders.create" },
      { method: "GET", path: "/ping", flow: "orders.ping" },
    ]);
  });
});

describe("flow names from the file tree", () => {
  it("default to <unit>.<export>, the unit being the first folder under src/flows/", () => {
    expect(defaultFlowName("src/flows/ops/email-dlq.ts", "list")).toBe("ops.list");
    expect(defaultFlowName("src/flows/trials/start.ts", "start")).toBe("trials.start");
    expect(defaultFlowName("src/flows/notes/[id]/get.ts", "get")).toBe("notes.get");
    expect(defaultFlowName("src/flows/(admin)/users/list.ts", "list")).toBe("users.list");
    expect(defaultFlowName("src/flows/main/route.ts", "home")).toBe("main.home");
    // No folder, no unit: the export alone; a default export takes the file's name.
    expect(defaultFlowName("src/flows/hello.ts", "hello")).toBe("hello");
    expect(defaultFlowName("src/flows/orders/list.ts", "default")).toBe("orders.list");
    expect(defaultFlowName("src/lib/helpers.ts", "chargeOrder")).toBe("lib.chargeOrder");
  });

  it("two flows with one name fail at boot naming both files and the fix", () => {
    const e = bootError(() =>
      buildRegistry([
        { path: "src/flows/ops/email-dlq.ts", exports: { list: get() } },
        { path: "src/flows/ops/jobs-dlq.ts", exports: { list: get() } },
      ]),
    );
    expect(e.code).toBe("OKE1075");
    expect(e.message).toBe(
      'Two different flows are named "ops.list" (src/flows/ops/email-dlq.ts#list and src/flows/ops/jobs-dlq.ts#list).',
    );
    expect(e.fix).toBe(
      'Name one of them explicitly where it is declared: flow("ops.<other-name>", { ... }).',
    );
  });

  it("an explicit name wins and so avoids the clash", () => {
    const r = buildRegistry([
      { path: "src/flows/ops/email-dlq.ts", exports: { list: get() } },
      {
        path: "src/flows/ops/jobs-dlq.ts",
        exports: { list: on(http.get(), flow("ops.jobs-dlq", { do: () => 1 })) },
      },
    ]);
    expect(r.manifest.routes.map((x) => x.flow)).toEqual(["ops.list", "ops.jobs-dlq"]);
  });
});

describe("routes that collide", () => {
  it("fail at boot naming both files", () => {
    const e = bootError(() =>
      buildRegistry([
        { path: "src/flows/orders/create.ts", exports: { create: post() } },
        { path: "src/flows/orders/index.ts", exports: { place: post() } },
      ]),
    );
    expect(e.code).toBe("OKE1074");
    expect(e.message).toBe(
      'Duplicate route POST /orders: bound by flows "orders.create" (src/flows/orders/create.ts#create) and "orders.place" (src/flows/orders/index.ts#place).',
    );
    expect(e.fix).toContain('http.post("/…")');
  });

  it("also within one file, and with differently named parameters", () => {
    expect(
      bootError(() =>
        buildRegistry([{ path: "src/flows/orders/list.ts", exports: { list: get(), recent: get() } }]),
      ).code,
    ).toBe("OKE1074");
    expect(
      bootError(() =>
        buildRegistry([
          { path: "src/flows/notes/[id]/get.ts", exports: { get: get() } },
          { path: "src/flows/notes/[noteId].ts", exports: { show: get() } },
        ]),
      ).message,
    ).toContain('(src/flows/notes/[id]/get.ts#get) and "notes.show" (src/flows/notes/[noteId].ts#show)');
  });

  it("one method per leaf: GET and POST on the same path are two routes", () => {
    const r = buildRegistry([
      { path: "src/flows/orders/create.ts", exports: { create: post() } },
      { path: "src/flows/orders/list.ts", exports: { list: get() } },
    ]);
    expect(r.manifest.routes).toEqual([
      { method: "GET", path: "/orders", flow: "orders.list" },
      { method: "POST", path: "/orders", flow: "orders.create" },
    ]);
  });
});

describe("path parameters that cannot be routes", () => {
  it("a bracket name that is not an identifier is refused at boot (OKE1083) naming the file", () => {
    const e = bootError(() =>
      buildRegistry([{ path: "src/flows/users/[user-id]/get.ts", exports: { get: get() } }]),
    );
    expect(e.code).toBe("OKE1083");
    expect(e.message).toBe(
      "Cannot derive a route from src/flows/users/[user-id]/get.ts: \"[user-id]\" is not a path parameter: a parameter's name becomes a field of the flow's input, so it must be an identifier (letters, digits, _ and $).",
    );
    expect(e.fix).toBe("Rename it, e.g. [userId], or give the binding an explicit path.");
    expect(bootError(() => fileRoutePath("src/flows/users/[id.json].ts")).code).toBe("OKE1083");
  });

  it("a catch-all that is not the last segment is refused at boot (OKE1083) naming the file", () => {
    const e = bootError(() =>
      buildRegistry([{ path: "src/flows/files/[...path]/meta.ts", exports: { meta: get() } }]),
    );
    expect(e.code).toBe("OKE1083");
    expect(e.message).toContain("src/flows/files/[...path]/meta.ts");
    expect(e.message).toContain('the catch-all "[...path]" matches the rest of the path');
    // Last: as a file, or as the folder of a silent leaf.
    expect(fileRoutePath("src/flows/files/[...path]/get.ts")).toBe("/files/*");
  });

  it("an explicit path leaves such a file alone", () => {
    const r = buildRegistry([
      {
        path: "src/flows/files/[...path]/meta.ts",
        exports: { meta: on(http.get("/meta"), flow({ do: () => 1 })) },
      },
    ]);
    expect(r.manifest.routes).toEqual([{ method: "GET", path: "/meta", flow: "files.meta" }]);
  });

  it("a catch-all's value is named after it: restParam on the route, namedParams renames the router's *", () => {
    const r = buildRegistry([{ path: "src/flows/files/[...slug].ts", exports: { read: get() } }]);
    expect(r.routes[0]).toMatchObject({ path: "/files/*", restParam: "slug" });
    expect(restParamOf("src/flows/files/[...path]/get.ts")).toBe("path");
    expect(restParamOf("src/flows/notes/[id]/get.ts")).toBeUndefined();
    expect(namedParams({ "*": "a/b/c" }, "slug")).toEqual({ slug: "a/b/c" });
    expect(namedParams({ id: "1" }, undefined)).toEqual({ id: "1" });
  });
});

describe("barrels", () => {
  it("a re-export takes neither the route nor the name: the declaring file does", () => {
    const create = post();
    const list = get();
    const r = buildRegistry([
      { path: "src/flows/index.ts", exports: { create, list }, reexports: ["create", "list"] },
      { path: "src/flows/orders/_all.ts", exports: { create }, reexports: ["create"] },
      { path: "src/flows/orders/create.ts", exports: { create } },
      { path: "src/flows/orders/list.ts", exports: { list } },
    ]);
    expect(r.manifest.routes).toEqual([
      { method: "GET", path: "/orders", flow: "orders.list" },
      { method: "POST", path: "/orders", flow: "orders.create" },
    ]);
    expect(r.manifest.flows.map((f) => f.source)).toEqual([
      "src/flows/orders/create.ts#create",
      "src/flows/orders/list.ts#list",
    ]);
  });
});

describe("a signal or channel declared twice", () => {
  it("with different options fails at boot naming both files and the option (OKE1073)", () => {
    const e = bootError(() =>
      buildRegistry([
        { path: "src/signals/a.ts", exports: { email: signal.once("tasks.email", { retries: 3 }) } },
        { path: "src/signals/b.ts", exports: { email: signal.once("tasks.email", { retries: 5 }) } },
      ]),
    );
    expect(e.code).toBe("OKE1073");
    expect(e.message).toBe(
      'Signal "tasks.email" is declared twice with different retries: retries 3 in src/signals/a.ts#email, retries 5 in src/signals/b.ts#email.',
    );
    expect(e.fix).toBe(
      'Declare "tasks.email" once (in src/signals/) and import that handle wherever it is bound or emitted.',
    );
    const kinds = bootError(() =>
      buildRegistry([
        { path: "src/signals/a.ts", exports: { s: signal.once("x") } },
        { path: "src/signals/b.ts", exports: { s: signal.broadcast("x") } },
      ]),
    );
    expect(kinds.message).toBe(
      'Signal "x" is declared twice with different delivery: delivery "once" in src/signals/a.ts#s, delivery "broadcast" in src/signals/b.ts#s.',
    );
  });

  it("two schema objects conflict even when they print alike", () => {
    const e = bootError(() =>
      buildRegistry([
        { path: "src/signals/a.ts", exports: { n: signal.once("n", { schema: z.number().min(1) }) } },
        { path: "src/signals/b.ts", exports: { n: signal.once("n", { schema: z.number().max(10) }) } },
      ]),
    );
    expect(e.code).toBe("OKE1073");
    expect(e.message).toBe(
      'Signal "n" is declared twice with different schemas: one schema object in src/signals/a.ts#n, another in src/signals/b.ts#n.',
    );
  });

  it("one handle re-exported, or two alike without a schema, is fine", () => {
    const schema = z.object({ to: z.string() });
    const email = signal.once("tasks.email", { schema, optional: true });
    const r = buildRegistry([
      { path: "src/signals/email.ts", exports: { email } },
      { path: "src/signals/index.ts", exports: { email }, reexports: ["email"] },
      {
        path: "src/signals/other.ts",
        exports: { again: signal.once("tasks.email", { schema, optional: true }) },
      },
      { path: "src/signals/p.ts", exports: { p: signal.broadcast("p") } },
      { path: "src/signals/q.ts", exports: { p: signal.broadcast("p") } },
    ]);
    expect(r.signals.get("tasks.email")).toBe(email);
  });

  it("a channel with different options fails at boot naming both files and the option (OKE1077)", () => {
    const e = bootError(() =>
      buildRegistry([
        { path: "src/channels/a.ts", exports: { c: channel("email.welcome", { timeoutMs: 1000 }) } },
        { path: "src/channels/b.ts", exports: { c: channel("email.welcome", { timeoutMs: 2000 }) } },
      ]),
    );
    expect(e.code).toBe("OKE1077");
    expect(e.message).toBe(
      'Channel "email.welcome" is declared twice with different timeoutMs: timeoutMs 1000 in src/channels/a.ts#c, timeoutMs 2000 in src/channels/b.ts#c.',
    );
    expect(e.fix).toBe('Declare "email.welcome" once and import that channel wherever it is sent to.');
  });
});

describe("a catch-all route in a running app", () => {
  it("hands the rest of the path to the flow under the catch-all's own name, over app.request", async () => {
    const read = on(http.get(), flow({ in: z.object({ slug: z.string() }), do: ({ slug }) => ({ slug }) }));
    const app = createApp({
      modules: [{ path: "src/flows/files/[...slug].ts", exports: { read } }],
      env: "test",
    });
    try {
      const res = await app.request("/files/a/b/c");
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ ok: true, data: { slug: "a/b/c" } });
    } finally {
      await app.stop();
    }
  });
});
