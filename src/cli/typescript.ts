/** Registers tsx for the commands that import the user's project (TypeScript, extensionless imports). */

let registered = false;

/**
 * tsx's loader, registered once, before the project is imported. Only the commands that load the
 * project call this: setting tsx up costs ~0.3 s of CPU, which the operator commands (plain HTTP to
 * a running app's Console) would pay for nothing. In a checkout of okengine the CLI itself runs from
 * its TypeScript sources, so bin/oke.js has registered tsx already.
 */
export async function registerTypeScript(): Promise<void> {
  if (registered || import.meta.url.endsWith(".ts")) return;
  registered = true;
  const { register } = await import("tsx/esm/api");
  register();
}
