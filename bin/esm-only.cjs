// What require("okengine") loads: okengine is ES modules only, and this says how to import it instead of Node's "No exports main defined".
"use strict";
throw new Error(
  'okengine is an ES module package and cannot be loaded with require(): import it from an ES module instead (import { flow } from "okengine"), with "type": "module" in your package.json or in a .mjs / .mts file.',
);
