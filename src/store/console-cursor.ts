/** Opaque keyset cursors of Console listings: a number and the rest of the sort key. */

/** Cursor of a two-part sort key: "<number>.<rest>". */
export const encodeCursor = (a: number, b: string | number): string => `${a}.${b}`;
export function decodeCursor(cursor: string): [number, string] | undefined {
  const dot = cursor.indexOf(".");
  if (dot <= 0) return undefined;
  const a = Number(cursor.slice(0, dot));
  return Number.isFinite(a) ? [a, cursor.slice(dot + 1)] : undefined;
}
