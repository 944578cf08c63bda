// The Console's page files: read once at start from beside the server module; a missing one refuses the Console with OKE1608.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { loadPage } from "./server.ts";

describe("the Console's page files", () => {
  it("are the three files beside the server, each with its content type", async () => {
    const page = await loadPage();
    expect([...page.keys()].sort()).toEqual(["/", "/console.css", "/console.js"]);
    expect(page.get("/")!.type).toBe("text/html; charset=utf-8");
    expect(page.get("/")!.body.toString("utf8")).toContain('src="/console.js"');
    expect(page.get("/console.js")!.body.length).toBeGreaterThan(10_000);
  });

  it("a missing file (a broken install) is OKE1608 naming the file, not an empty reply at every page load", async () => {
    const empty = mkdtempSync(join(tmpdir(), "oke-page-"));
    try {
      const err = await loadPage([pathToFileURL(`${empty}/`), pathToFileURL(`${empty}/elsewhere/`)]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OkeError);
      expect(err).toMatchObject({ code: "OKE1608" });
      expect((err as OkeError).message).toBe(
        `okengine console: its page file ${join(empty, "index.html")} cannot be read (ENOENT)`,
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
