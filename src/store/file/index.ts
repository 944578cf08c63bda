/** The file driver's public surface. */
export {
  createFileStore,
  type FileStore,
  type FileStoreDiagnostics,
  type FileStoreOptions,
} from "./file-store.ts";
