#!/usr/bin/env node
// Build step after tsc: copies the files tsc does not emit (the Console's hand-written page) into dist/.
import { cpSync } from "node:fs";
import { URL } from "node:url";

const ASSETS = ["console/page"];

for (const dir of ASSETS) {
  cpSync(new URL(`../src/${dir}`, import.meta.url), new URL(`../dist/${dir}`, import.meta.url), {
    recursive: true,
  });
}
