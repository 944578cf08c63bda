// Terminal output for the operator commands: padded tables, ages, times and short previews.

/**
 * Columns padded to their widest cell; numbers right-aligned, and the columns `right` names (ages
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
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]): string =>
    c
      .map((text, i) =>
        numeric[i] ? text.padStart(widths[i]!) : i === c.length - 1 ? text : text.padEnd(widths[i]!),
      )
      .join("  ")
      .trimEnd();
  return [line(headers.map((h, i) => (numeric[i] ? h.padStart(widths[i]!) : h))), ...cells.map(line)].join(
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

/** At most `n` characters on one line. */
export function short(text: string | null | undefined, n = 60): string | undefined {
  if (text === null || text === undefined) return undefined;
  const one = text.replace(/\s+/g, " ");
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}
