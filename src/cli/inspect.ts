/** oke routes / oke manifest: the app as declared, without opening its store. */
import { createApp } from "../app/app.ts";
import type { HttpRoute } from "../app/types.ts";
import type { Manifest } from "../app/manifest.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { loadProject } from "../project/load-project.ts";

/** The app as declared, without opening its store or starting anything (routes, manifest). */
export async function loadManifest(dir: string): Promise<Manifest> {
  const project = await loadProject(dir);
  const app = createApp({
    modules: project.modules,
    config: project.config,
    env: "dev",
    root: project.root,
    // A throwaway store and a silent logger: inspecting must not touch .oke/ or the database.
    store: createMemoryStore(),
    logger: createLogger({ format: "silent" }),
  });
  return app.manifest;
}

/** METHOD PATH FLOW, padded into columns. */
export function formatRoutes(routes: readonly HttpRoute[]): string {
  if (routes.length === 0) return "no HTTP routes";
  const rows = [["METHOD", "PATH", "FLOW"], ...routes.map((r) => [r.method, r.path, r.flow])];
  const widths = [0, 1].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map(([m, p, f]) => `${m!.padEnd(widths[0]!)}  ${p!.padEnd(widths[1]!)}  ${f!}`).join("\n");
}
