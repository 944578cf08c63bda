#!/usr/bin/env node
// The `oke` command. TypeScript runs through tsx, so neither okengine nor the
// project needs a build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
