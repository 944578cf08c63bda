import { describe, expect, it } from "vitest";
import { defaultFlowName, fileRoutePath } from "./file-routes.ts";

describe("file routes", () => {
  it("maps a file under src/flows to its path", () => {
    expect(fileRoutePath("src/flows/trials/start.ts", "start", false)).toBe("/trials/start");
    expect(fileRoutePath("src/flows/ops/email-dlq.ts", "list", false)).toBe("/ops/email-dlq");
  });
  it("drops index files and (group) folders", () => {
    expect(fileRoutePath("src/flows/users/index.ts", "list", false)).toBe("/users");
    expect(fileRoutePath("src/flows/(admin)/stats.ts", "stats", false)).toBe("/stats");
    expect(fileRoutePath("src/flows/index.ts", "home", false)).toBe("/");
  });
  it("turns [param] into :param and [...rest] into a wildcard", () => {
    expect(fileRoutePath("src/flows/users/[id]/edit.ts", "edit", false)).toBe("/users/:id/edit");
    expect(fileRoutePath("src/flows/files/[...path].ts", "get", false)).toBe("/files/*");
  });
  it("appends the export name when a file shares a method between exports", () => {
    expect(fileRoutePath("src/flows/orders/create.ts", "create", true)).toBe("/orders/create");
    expect(fileRoutePath("src/flows/orders/create.ts", "createDraft", true)).toBe(
      "/orders/create/create-draft",
    );
    expect(fileRoutePath("src/flows/index.ts", "ping", true)).toBe("/ping");
  });
  it("names flows <unit>.<export>, without repeating the file name", () => {
    expect(defaultFlowName("src/flows/trials/start.ts", "start")).toBe("trials.start");
    expect(defaultFlowName("src/flows/ops/email-dlq.ts", "list")).toBe("ops.email-dlq.list");
    expect(defaultFlowName("src/flows/users/[id]/edit.ts", "edit")).toBe("users.id.edit");
    expect(defaultFlowName("src/flows/orders/index.ts", "list")).toBe("orders.list");
    expect(defaultFlowName("src/lib/helpers.ts", "chargeOrder")).toBe("lib.helpers.chargeOrder");
  });
});
