/** Opaque keyset cursors of Console listings: a number and the rest of the sort key. */

/** Cursor of a two-part sort key: "<integer>.<rest>". */
export const encodeCursor = (a: number, b: string | number): string => `${a}.${b}`;

/**
 * A run listing's cursor, "<createdAt>.<id>": undefined unless encodeCursor could have made it. The
 * drivers seek with what this returns, and the Console API refuses (400 OKE1605) a cursor it cannot
 * read, before any driver sees it: a driver would read it as no cursor and start again at page 1.
 */
export function decodeCursor(cursor: string): [number, string] | undefined {
  const dot = cursor.indexOf(".");
  if (dot <= 0 || dot === cursor.length - 1) return undefined;
  const head = cursor.slice(0, dot);
  if (!/^-?\d{1,16}$/.test(head)) return undefined;
  const a = Number(head);
  return Number.isSafeInteger(a) ? [a, cursor.slice(dot + 1)] : undefined;
}

/** A message listing's cursor, "<time, or 0>.<seq>" (decodeCursor's rule, the seq a whole number too). */
export function decodeSeqCursor(cursor: string): [number, number] | undefined {
  const c = decodeCursor(cursor);
  if (c === undefined || !/^\d{1,15}$/.test(c[1])) return undefined;
  return [c[0], Number(c[1])];
}

/** An audit listing's cursor: the id of the last entry of the previous page. */
export function decodeAuditCursor(cursor: string): number | undefined {
  return /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
}
