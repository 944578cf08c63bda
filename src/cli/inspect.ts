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
  // A loop, not Math.max(...): an app with very many routes must not overflow the stack.
  const widths = [0, 0];
  for (const r of rows) for (const i of [0, 1]) widths[i] = Math.max(widths[i]!, r[i]!.length);
  return rows.map(([m, p, f]) => `${m!.padEnd(widths[0]!)}  ${p!.padEnd(widths[1]!)}  ${f!}`).join("\n");
}
