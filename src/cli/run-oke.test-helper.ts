/** Runs an `oke` operator command in this process, its console output and exit code captured, for the CLI's tests. */
import { Command } from "commander";
import { vi } from "vitest";
import { addOperatorCommands } from "./operator-commands.ts";

export interface Ran {
  /** The exit code the command set, or "threw" when an error escaped it (a raw stack for the operator). */
  code: number | string;
  stdout: string;
  stderr: string;
}

/** One `oke` operator command, in this process. */
export async function oke(...args: string[]): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  const error = vi
    .spyOn(console, "error")
    .mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  process.exitCode = undefined;
  const program = new Command("oke").exitOverride();
  addOperatorCommands(program);
  let code: number | string;
  try {
    await program.parseAsync(args, { from: "user" });
    code = Number(process.exitCode ?? 0);
  } catch (e) {
    code = "threw";
    err.push(String(e));
  } finally {
    log.mockRestore();
    error.mockRestore();
    process.exitCode = undefined;
  }
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}
