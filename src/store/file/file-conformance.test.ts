// The Store contract on the file driver (its SQLite engine), each case on a fresh directory.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeStoreConformance } from "../conformance/suite.ts";
import { createFileStore } from "./file-store.ts";

describeStoreConformance(
  "file",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "oke-file-conf-"));
    const store = createFileStore({ dir });
    await store.open();
    return {
      store,
      cleanup: async () => {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
  {
    leaveToLease: true,
    leaveClaimsToLease: true,
    resettleDelivered: true,
    releaseHold: true,
    terminateRun: true,
    lastTapePosition: true,
    deliveredFailed: true,
    discardPending: true,
    tapeGap: true,
    journalEnds: true,
  },
);
