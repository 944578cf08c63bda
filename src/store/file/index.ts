/** The file driver's public surface. */
export {
  DEFAULT_COMPACT_BYTES,
  createFileStore,
  type FileStore,
  type FileStoreDiagnostics,
  type FileStoreOptions,
} from "./file-store.ts";
