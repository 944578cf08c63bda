// The Store contract on the file driver, across snapshot and fresh log.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeStoreConformance } from "../conformance/suite.ts";
import { createFileStore } from "./file-store.ts";

// A small compaction threshold so the suite also runs across snapshot + fresh log.
describeStoreConformance("file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "oke-file-conf-"));
  const store = createFileStore({ dir, compactBytes: 4096 });
  await store.open();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
