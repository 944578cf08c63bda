#!/usr/bin/env node
// The `oke` command: okengine's compiled CLI (dist/), which registers tsx itself for the commands that load the project.
import { existsSync } from "node:fs";
import { URL } from "node:url";

// In a checkout of okengine itself (src/ present, which the published package never ships), run the
// sources, so a change is live without a build: tsx loads them, and with them the project. An
// installed package runs dist/, and only the commands that import the project's TypeScript (start,
// routes, manifest, dev's child) register tsx (src/cli/typescript.ts): the operator commands skip
// its ~0.3 s of CPU.
const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register();
  await import(source.href);
} else {
  await import(new URL("../dist/cli/main.js", import.meta.url).href);
}
