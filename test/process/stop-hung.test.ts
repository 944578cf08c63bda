// app.stop() in a real process whose only work left is a hung handler: stop waits out its deadline and returns.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { Child } from "./spawn.ts";

const CHILD = fileURLToPath(new URL("./stop-hung-child.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "oke-stop-hung-"));
let child: Child | undefined;

afterAll(async () => {
  if (child && !child.dead) await child.kill();
  rmSync(dir, { recursive: true, force: true });
});

it("returns from stop() at its deadline, closes the store and logs what it left, then the process exits 0", async () => {
  child = new Child({ OKE_FILE_DIR: dir }, CHILD);
  await child.waitFor((e) => e.event === "handling", "the handler to start");
  await child.waitFor((e) => e.event === "stop-resolved", "stop() to return");
  expect(await child.exited).toBe(0);
  // The last log line names the message the hung handler still held.
  const stopped = child.stderr
    .split("\n")
    .filter((l) => l.includes('"msg"'))
    .map((l) => JSON.parse(l) as { msg: string; messageIds?: string[] })
    .find((l) => l.msg.startsWith("okengine stopped"));
  expect(stopped?.messageIds).toHaveLength(1);
  // store.close() ran: the file driver's lock is gone.
  expect(existsSync(join(dir, "lock"))).toBe(false);
});
