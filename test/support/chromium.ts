// Debian's Chromium for the browser tests, driven by playwright-core with the flags this machine needs; no browser is downloaded.
import { chromium, type Browser } from "playwright-core";

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless Chromium (`CHROMIUM_PATH`, default /usr/bin/chromium, as .ci/run installs it). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    headless: true,
    args: FLAGS,
  });
}
