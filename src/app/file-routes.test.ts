// Names and HTTP paths derived from the file tree.
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { flow } from "../flow/flow.ts";
import { http } from "../flow/http-trigger.ts";
import { on } from "../flow/on.ts";
import { defaultFlowName, fileRoutePath, isRouteFile } from "./file-routes.ts";
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
