/** oke dev's file watcher: one non-recursive fs.watch per directory, so a file replaced by rename is still seen. */
import { readdirSync, statSync, watch, type FSWatcher } from "node:fs";
import { join, relative, sep } from "node:path";

export interface TreeWatcherOptions {
  /** Directories (relative to the root, "/" separators; "" is the root) to watch, with their files. */
  descend(rel: string): boolean;
  /** Files (relative to the root) whose change counts. */
  relevant(rel: string): boolean;
}

export interface TreeWatcher {
  close(): void;
}

const inode = (path: string): number | undefined => {
  try {
    const s = statSync(path);
    return s.isDirectory() ? s.ino : undefined;
  } catch {
    return undefined;
  }
};

/**
 * Calls `onChange` with the path of whatever changed under `root`, as the options select.
 *
 * Why not `fs.watch(dir, { recursive: true })`: on Linux (Node 20) it watches each file's inode, so a
 * file saved by "write a temp file, rename it over the old one" (sed -i, JetBrains' safe write, vim's
 * backupcopy) is lost after its first such save. A directory's own watch reports every entry that
 * is created, written, touched, renamed or removed in it, whatever inode the entry has, on every
 * platform. Directories come and go: a new one is watched when its parent reports it, and the watch
 * of one that is gone (or replaced) is dropped, with those under it, when its parent reports so.
 */
export function watchTree(
  root: string,
  options: TreeWatcherOptions,
  onChange: (path: string) => void,
): TreeWatcher {
  const watched = new Map<string, { watcher: FSWatcher; ino: number }>();
  let closed = false;
  const relOf = (path: string): string => relative(root, path).split(sep).join("/");

  const drop = (dir: string): void => {
    watched.get(dir)?.watcher.close();
    watched.delete(dir);
  };

  /** Drops the watches of `dir` and the directories under it. */
  const dropTree = (dir: string): void => {
    for (const d of [...watched.keys()]) if (d === dir || d.startsWith(dir + sep)) drop(d);
  };

  /** Drops the watch of `dir` (and under it) when it no longer exists at its path, or is another directory now. */
  const recheck = (dir: string): void => {
    const w = watched.get(dir);
    if (w !== undefined && inode(dir) !== w.ino) dropTree(dir);
  };

  const add = (dir: string): void => {
    if (closed || watched.has(dir) || !options.descend(relOf(dir))) return;
    const ino = inode(dir);
    if (ino === undefined) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: true }, (event, name) => {
        if (closed) return;
        if (name === null) {
          // Some platforms do not say which entry changed: look at the whole directory again.
          for (const d of [...watched.keys()]) recheck(d);
          scan(dir);
          if (options.relevant(relOf(dir))) onChange(dir);
          return;
        }
        const path = join(dir, name.toString());
        const rel = relOf(path);
        // A directory that appeared or went away counts as a change: the files in it did too. Only a
        // directory: a file that `descend` would take for one is not relevant for being named so.
        let folder = false;
        if (event === "rename") {
          const wasWatched = watched.has(path);
          recheck(path);
          const isDir = inode(path) !== undefined;
          folder = (wasWatched || isDir) && options.descend(rel);
          // A new (or renamed, or replaced) directory: it and what it holds count from now on.
          if (folder && isDir) add(path);
        }
        if (options.relevant(rel) || folder) onChange(path);
      });
    } catch {
      return; // removed between the listing and the watch
    }
    // A watched directory removed (EPERM on Windows) ends its watch; its parent reports the removal.
    watcher.on("error", () => drop(dir));
    watched.set(dir, { watcher, ino });
    scan(dir);
  };

  const scan = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) add(join(dir, e.name));
  };

  add(root);
  return {
    close(): void {
      closed = true;
      for (const dir of [...watched.keys()]) drop(dir);
    },
  };
}
