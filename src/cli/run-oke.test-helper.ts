/** Runs an `oke` operator command in this process, its console output and exit code captured, for the CLI's tests. */
import { Command, CommanderError } from "commander";
import { vi } from "vitest";
import { addOperatorCommands } from "./operator-commands.ts";

export interface Ran {
  /** The exit code the command set, or "threw" when an error escaped it (a raw stack for the operator). */
  code: number | string;
  stdout: string;
  stderr: string;
}

/** Switches off every option's environment fallback, in `cmd` and the commands under it. */
function withoutEnvFallbacks(cmd: Command): void {
  for (const option of cmd.options) option.envVar = undefined;
  for (const sub of cmd.commands) withoutEnvFallbacks(sub);
}

/** The command running now: console and process.exitCode are the process's, so commands take turns. */
let turn: Promise<unknown> = Promise.resolve();

/**
 * One `oke` operator command, in this process. Calls made side by side run one after another
 * (each is an HTTP request or two). The connection comes from --url / --token only:
 * OKE_CONSOLE_URL / OKE_CONSOLE_TOKEN here would be the test runner's own environment, so the
 * fallbacks are off (the compiled binary's tests cover them). A refusal of commander's own (a bad
 * argument) is its exit code with its message on stderr, as from the binary.
 */
export function oke(...args: string[]): Promise<Ran> {
  const ran = turn.then(() => runOnce(args));
  turn = ran.catch(() => undefined);
  return ran;
}

async function runOnce(args: string[]): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  const error = vi
    .spyOn(console, "error")
    .mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  process.exitCode = undefined;
  const program = new Command("oke").exitOverride().configureOutput({
    writeOut: (s) => void out.push(s.replace(/\n$/, "")),
    writeErr: (s) => void err.push(s.replace(/\n$/, "")),
  });
  addOperatorCommands(program);
  withoutEnvFallbacks(program);
  let code: number | string;
  try {
    await program.parseAsync(args, { from: "user" });
    code = Number(process.exitCode ?? 0);
  } catch (e) {
    if (e instanceof CommanderError) code = e.exitCode;
    else {
      code = "threw";
      err.push(String(e));
    }
  } finally {
    log.mockRestore();
    error.mockRestore();
    process.exitCode = undefined;
  }
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}
