/** Words of operator-facing lines, shared by `oke`'s output and the Console's log lines: store names on one line, commands to paste, counts. */

/** A name from the store on one line (a terminal's or a log's): no control characters. */
export const oneLine = (name: string): string =>
  [...name].map((c) => (c < " " || c === "\u007f" ? " " : c)).join("");

/** A word as a POSIX shell reads it back, so a command in a line can be pasted: quoted unless plainly safe. */
export const shellWord = (w: string): string =>
  /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;

/** `1 run`, `2 runs`. */
export const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;
