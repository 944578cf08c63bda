#!/usr/bin/env node
// The `oke` command: okengine's compiled CLI (dist/), with tsx registered to load the project's TypeScript.
import { existsSync } from "node:fs";
import { URL } from "node:url";
import { register } from "tsx/esm/api";

// tsx loads the user's project (TypeScript, extensionless imports); okengine itself runs compiled.
register();
// In a checkout of okengine itself (src/ present, which the published package never ships), run the
// sources, so a change is live without a build. An installed package always runs dist/.
const source = new URL("../src/cli/main.ts", import.meta.url);
await import(existsSync(source) ? source.href : new URL("../dist/cli/main.js", import.meta.url).href);
