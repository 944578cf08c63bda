/** The oke command line: parses arguments and dispatches to dev, start, routes and manifest. */
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError } from "commander";
import { describeBootError } from "./boot-error.ts";
import type { DoctorFlags } from "./doctor.ts";
import { quietOnClosedStdout } from "./console-client.ts";
import { addOperatorCommands } from "./operator-commands.ts";
import { registerTypeScript } from "./typescript.ts";

// Each command loads its own module when it runs: dev, start, routes and manifest pull in the whole
// framework (about a second of loading on a busy machine), which the operator commands (plain HTTP
// to the Console) never need. Only the commands that import the project register tsx: start, routes,
// manifest and `oke dev`'s child (`__run`); the dev supervisor, init, doctor and the operator
// commands never import it.
const runApp = async (...args: Parameters<typeof import("./run-app.ts").runApp>): Promise<void> => {
  await registerTypeScript();
  return (await import("./run-app.ts")).runApp(...args);
};
const loadManifest = async (dir: string): ReturnType<typeof import("./inspect.ts").loadManifest> => {
  await registerTypeScript();
  return (await import("./inspect.ts")).loadManifest(dir);
};

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const parsePort = (v: string): number => {
  const n = Number(v);
  if (!/^\d+$/.test(v) || n > 65535)
    throw new InvalidArgumentError("expected a port number between 0 and 65535");
  return n;
};

const parseEnv = (v: string): "dev" | "test" | "prod" => {
  if (v !== "dev" && v !== "test" && v !== "prod")
    throw new InvalidArgumentError("expected dev, test or prod");
  return v;
};

const parseRole = (v: string): "all" | "web" | "worker" => {
  if (v !== "all" && v !== "web" && v !== "worker")
    throw new InvalidArgumentError("expected all, web or worker");
  return v;
};

/** `--role`: wins over instance.role and OKE_ROLE (docs/cli.md#web-and-worker-processes). */
const ROLE_HELP =
  "what this process runs: all (HTTP and background work), web (HTTP only) or worker (background work only); default: instance.role, OKE_ROLE, all";

interface ServeFlags {
  port?: number;
  host?: string;
  role?: "all" | "web" | "worker";
}

/** Boot errors: the message on stderr, exit code 1, no stack. */
const guard =
  <A extends unknown[]>(action: (...args: A) => Promise<void>) =>
  async (...args: A): Promise<void> => {
    try {
      await action(...args);
    } catch (e) {
      console.error(describeBootError(e));
      process.exit(1);
    }
  };

const program = new Command("oke")
  .description("okengine: flows bound to HTTP routes and signals")
  .version(pkg.version)
  .showHelpAfterError();

/** `--inspect[=[host:]port]`: only an address, so `oke dev --inspect my-app` is not taken for one silently. */
const parseInspect = (v: string): string => {
  if (!/^(\S+:)?\d+$/.test(v))
    throw new InvalidArgumentError(
      "expected [host:]port, e.g. --inspect=9230 (put the project directory before --inspect)",
    );
  return v;
};

program
  .command("dev")
  .description(
    "run the app in dev mode and restart it when src/, oke.config.*, package.json or tsconfig.json changes",
  )
  .argument("[dir]", "project directory", ".")
  .option("-p, --port <port>", "port to listen on (default: config, PORT, 6530)", parsePort)
  .option("--host <host>", "address to bind (default: config, else 127.0.0.1)")
  .option("--role <role>", ROLE_HELP, parseRole)
  .option(
    "--inspect [address]",
    "open the debugger in the app's process ([host:]port, default 127.0.0.1:9229)",
    parseInspect,
  )
  .option("--inspect-brk [address]", "the same, and pause before the app's first line", parseInspect)
  .action(
    guard(async (dir: string, flags: ServeFlags & { inspect?: string | true; inspectBrk?: string | true }) =>
      (await import("./dev.ts")).runDev(dir, flags),
    ),
  );

program
  .command("start")
  .description("run the app (env prod, or test when NODE_ENV=test)")
  .argument("[dir]", "project directory", ".")
  .option("-p, --port <port>", "port to listen on (default: config, PORT, 6530)", parsePort)
  .option("--host <host>", "address to bind (default: config, HOST, else 127.0.0.1)")
  .option("--role <role>", ROLE_HELP, parseRole)
  .action(
    guard((dir: string, flags: ServeFlags) =>
      runApp(dir, { ...flags, env: process.env.NODE_ENV === "test" ? "test" : "prod" }),
    ),
  );

program
  .command("init")
  .description("create a starter app (HTTP flow, work queue, durable flow, tests) in dir")
  .argument("[dir]", "directory to create (must be new or empty)", ".")
  .action(
    guard(async (dir: string) => {
      const { initProject, nextSteps } = await import("./init.ts");
      console.log(nextSteps(initProject(dir, pkg.version).root));
    }),
  );

program
  .command("routes")
  .description("print the HTTP routes: METHOD PATH FLOW")
  .argument("[dir]", "project directory", ".")
  .action(
    guard(async (dir: string) => {
      quietOnClosedStdout();
      const { formatRoutes } = await import("./inspect.ts");
      console.log(formatRoutes((await loadManifest(dir)).routes));
    }),
  );

program
  .command("manifest")
  .description("print the app's manifest (flows, routes, signals, clocks, channels) as JSON")
  .argument("[dir]", "project directory", ".")
  .action(
    guard(async (dir: string) => {
      quietOnClosedStdout();
      console.log(JSON.stringify(await loadManifest(dir), null, 2));
    }),
  );

program
  .command("doctor")
  .description(
    "check the file store (store.db, or an old-format journal.log before its import); --salvage keeps every valid record of such a log",
  )
  .argument("[dir]", "project directory", ".")
  .option("--salvage", "keep every valid record and move the damaged bytes to a side file")
  .option("--store <path>", "the file store directory, relative to [dir] (default: .oke)")
  .action(
    guard(async (dir: string, flags: DoctorFlags) => (await import("./doctor.ts")).runDoctor(dir, flags)),
  );

addOperatorCommands(program);

// The child process of `oke dev`; not for direct use.
program
  .command("__run", { hidden: true })
  .argument("<dir>")
  .requiredOption("--env <env>", "dev | test | prod", parseEnv)
  .option("-p, --port <port>", "port", parsePort)
  .option("--host <host>", "host")
  .option("--role <role>", "role", parseRole)
  .action(guard((dir: string, flags: ServeFlags & { env: "dev" | "test" | "prod" }) => runApp(dir, flags)));

await program.parseAsync(process.argv);
