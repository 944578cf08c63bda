/** Opens a SQLite database through better-sqlite3, saying what to do when its native binary was never built (install scripts skipped). */
import Database from "better-sqlite3";
import { fileStoreErrors } from "../file-errors.ts";

/**
 * `new Database(file, options)`. better-sqlite3 loads its compiled binary at the first open, so an
 * install that skipped install scripts (`npm install --ignore-scripts`, npm 12 without the approval)
 * fails here with "Could not locate the bindings file" and thirteen paths: that becomes OKE1340 with
 * the commands that build it, and what runs without it.
 */
export function openSqlite(file: string, options?: Database.Options): Database.Database {
  try {
    return new Database(file, options);
  } catch (e) {
    if (isMissingBinary(e)) throw fileStoreErrors.noNativeBinary(e);
    throw e;
  }
}

const isMissingBinary = (e: unknown): boolean =>
  e instanceof Error &&
  (/Could not locate the bindings file/.test(e.message) ||
    // A binary built for another Node or platform (copied node_modules, a Node upgrade).
    /NODE_MODULE_VERSION|was compiled against a different Node\.js version|invalid ELF header/.test(
      e.message,
    ));
