// Terminal output for the operator commands: padded tables, ages, times and short previews.

/** User-perceived characters: an emoji with its modifiers, a flag, a letter with its accents. */
const graphemes = new Intl.Segmenter("en", { granularity: "grapheme" });

/**
 * East Asian Wide and Fullwidth code points (Unicode's EastAsianWidth W and F), the blocks a name or
 * message uses: Hangul, CJK, kana, fullwidth forms. Kept short on purpose; rarer wide code points
 * read as one column (a misaligned row, never a cut character).
 */
const WIDE: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x1f300, 0x1f64f],
  [0x1f900, 0x1f9ff],
  [0x20000, 0x2fffd],
  [0x30000, 0x3fffd],
];

/** Columns one grapheme takes in a terminal: 2 for wide characters and emoji, 0 for controls and format characters. */
function graphemeWidth(g: string): number {
  const cp = g.codePointAt(0) ?? 0;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || /^[\p{Cf}\p{Mn}\p{Me}]+$/u.test(g)) return 0;
  // An emoji shown as one (its default, or asked for by U+FE0F), a flag, a ZWJ sequence: two columns.
  if (/\p{Emoji_Presentation}/u.test(g) || (g.includes("\uFE0F") && /\p{Extended_Pictographic}/u.test(g)))
    return 2;
  return WIDE.some(([a, b]) => cp >= a && cp <= b) ? 2 : 1;
}

/** The columns `text` takes in a terminal (not its length in UTF-16 units). */
export function displayWidth(text: string): number {
  let w = 0;
  for (const { segment } of graphemes.segment(text)) w += graphemeWidth(segment);
  return w;
}

const padEnd = (text: string, width: number): string =>
  text + " ".repeat(Math.max(0, width - displayWidth(text)));
const padStart = (text: string, width: number): string =>
  " ".repeat(Math.max(0, width - displayWidth(text))) + text;

/**
 * Columns padded to their widest cell (in terminal columns: a CJK character or an emoji takes two); numbers right-aligned, and the columns `right` names (ages
 * such as "1m05s", read as amounts); empty cells shown as "-".
 */
export function table(
  headers: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>,
  options: { right?: readonly string[] } = {},
): string {
  const cells = rows.map((r) => headers.map((_, i) => cellText(r[i])));
  const numeric = headers.map(
    (h, i) =>
      options.right?.includes(h) === true ||
      (rows.some((r) => typeof r[i] === "number") &&
        rows.every((r) => typeof r[i] === "number" || r[i] === null || r[i] === undefined)),
  );
  const widths = headers.map((h, i) => Math.max(displayWidth(h), ...cells.map((c) => displayWidth(c[i]!))));
  const line = (c: readonly string[]): string =>
    c
      .map((text, i) =>
        numeric[i] ? padStart(text, widths[i]!) : i === c.length - 1 ? text : padEnd(text, widths[i]!),
      )
      .join("  ")
      .trimEnd();
  return [line(headers.map((h, i) => (numeric[i] ? padStart(h, widths[i]!) : h))), ...cells.map(line)].join(
    "\n",
  );
}

function cellText(v: string | number | null | undefined): string {
  if (v === null || v === undefined || v === "") return "-";
  return String(v).replace(/[\r\n\t]+/g, " ");
}

/** 950 → "950ms", 75 000 → "1m15s", 2 days → "2d3h". */
export function age(ms: number | null | undefined): string | undefined {
  if (ms === null || ms === undefined) return undefined;
  const neg = ms < 0;
  let s = Math.round(Math.abs(ms) / 1000);
  let text: string;
  if (Math.abs(ms) < 1000) text = `${Math.round(Math.abs(ms))}ms`;
  else if (s < 60) text = `${s}s`;
  else if (s < 3600) text = `${Math.floor(s / 60)}m${pad2(s % 60)}s`;
  else if (s < 86_400) text = `${Math.floor(s / 3600)}h${pad2(Math.floor((s % 3600) / 60))}m`;
  else {
    const d = Math.floor(s / 86_400);
    s -= d * 86_400;
    text = `${d}d${Math.floor(s / 3600)}h`;
  }
  return neg ? `-${text}` : text;
}

const pad2 = (n: number): string => String(n).padStart(2, "0");

/** Epoch ms as "2026-12-01 12:30:05Z" (UTC, to the second). */
export function when(t: number | null | undefined): string | undefined {
  if (t === null || t === undefined) return undefined;
  return `${new Date(t).toISOString().slice(0, 19).replace("T", " ")}Z`;
}

/**
 * At most `n` terminal columns on one line, "…" ending a cut one. Cut between graphemes, never inside
 * one: a surrogate pair cut in two printed U+FFFD, an emoji cut from its modifier another emoji.
 */
export function short(text: string | null | undefined, n = 60): string | undefined {
  if (text === null || text === undefined) return undefined;
  const one = text.replace(/\s+/g, " ");
  if (displayWidth(one) <= n) return one;
  let out = "";
  let w = 0;
  for (const { segment } of graphemes.segment(one)) {
    const gw = graphemeWidth(segment);
    if (w + gw > n - 1) break;
    out += segment;
    w += gw;
  }
  return `${out}…`;
}
