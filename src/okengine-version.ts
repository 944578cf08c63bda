/** The version of okengine running, from its package.json: what heartbeats report and migrations record. */
import { readFileSync } from "node:fs";

let version: string | undefined;

/** okengine's own version ("0.1.0"), or "unknown" when its package.json cannot be read. */
export function okengineVersion(): string {
  if (version !== undefined) return version;
  try {
    // src/okengine-version.ts and dist/okengine-version.js both sit one level below the package root.
    version = (
      JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
    ).version;
  } catch {
    version = "unknown";
  }
  return version;
}
