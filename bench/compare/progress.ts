/**
 * The progress display on stderr: one line per measurement with its result;
 * on a terminal the current line also shows live counters (rewritten in
 * place, at most 4 times a second).
 */
export class Progress {
  private step = 0;
  private label = "";
  private started = performance.now();
  private readonly t0 = performance.now();
  private lastTick = 0;
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly total: number) {}

  private clock(): string {
    const s = Math.round((performance.now() - this.t0) / 1_000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  }

  private prefix(): string {
    return `[${String(this.step).padStart(String(this.total).length)}/${this.total} ${this.clock()}]`;
  }

  begin(label: string): void {
    this.step++;
    this.label = label;
    this.started = performance.now();
    if (this.tty) process.stderr.write(`\r\x1b[K${this.prefix()} ${label} …`);
  }

  tick(text: string): void {
    if (!this.tty) return;
    const now = performance.now();
    if (now - this.lastTick < 250) return;
    this.lastTick = now;
    process.stderr.write(`\r\x1b[K${this.prefix()} ${this.label} … ${text}`);
  }

  end(result: string): void {
    const secs = ((performance.now() - this.started) / 1_000).toFixed(1);
    process.stderr.write(
      `${this.tty ? "\r\x1b[K" : ""}${this.prefix()} ${this.label}: ${result} (${secs} s)\n`,
    );
  }

  note(text: string): void {
    process.stderr.write(`${this.tty ? "\r\x1b[K" : ""}${text}\n`);
  }
}
