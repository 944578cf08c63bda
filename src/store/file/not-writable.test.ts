/** A store directory this process may not write: boot is refused with OKE1329 naming the directory and the fix, not a bare errno. */
import { describe, expect, it } from "vitest";
import { OkeError } from "../../errors.ts";
import { createFileStore } from "./file-store.ts";

describe("a file store in a directory the process may not write", () => {
  it("is refused with OKE1329 naming the directory, the cause and file.dir", async () => {
    // /sys refuses new directories to every user, root included (EPERM), on any Linux.
    const parent = `/sys/oke-not-writable-${process.pid}`;
    const dir = `${parent}/.oke`;
    const err = await createFileStore({ dir })
      .open()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OkeError);
    expect(err).toMatchObject({
      code: "OKE1329",
      message: `File store "${dir}" cannot be opened for writing: EPERM: operation not permitted, mkdir '${parent}'.`,
    });
    expect((err as OkeError).fix).toContain("`file.dir` in oke.config.ts");
  });
});
