// A stand-in HttpApp for the HTTP layer's own tests (routes, readiness, recorded logs).
import { pino } from "pino";
import type { HttpRoute, InvokeResult, Readiness, RouteRequest } from "./types.ts";
import { OkeError } from "../errors.ts";
import type { HttpApp } from "./handler.ts";

export interface LogLine {
  level: number;
  msg: string;
  status?: number;
  code?: string;
  flow?: string;
  err?: { message?: string; stack?: string };
}

export interface FakeApp extends HttpApp {
  calls: Array<{ route: HttpRoute; request: RouteRequest }>;
  logs: LogLine[];
  ready: Readiness;
  /** Resolves with the first log line (already written or to come) that matches. */
  waitForLog(match: (l: LogLine) => boolean): Promise<LogLine>;
  /** Holds GET /slow until release() is called. */
  releaseSlow(): void;
  slowStarted: Promise<void>;
}

/**
 * The App subset the HTTP layer uses, with one route per behaviour under test.
 * The logger is a real pino writing JSON lines into `logs`.
 */
export function createFakeApp(): FakeApp {
  const logs: LogLine[] = [];
  const logWaiters: Array<() => void> = [];
  const logger = pino(
    { level: "debug" },
    {
      write: (line: string) => {
        logs.push(JSON.parse(line) as LogLine);
        for (const w of logWaiters.splice(0)) w();
      },
    },
  );
  const waitForLog = (match: (l: LogLine) => boolean): Promise<LogLine> =>
    new Promise((resolve) => {
      const check = (): void => {
        const hit = logs.find(match);
        if (hit) resolve(hit);
        else logWaiters.push(check);
      };
      check();
    });
  const calls: FakeApp["calls"] = [];
  let releaseSlow!: () => void;
  let slowStarted!: () => void;
  const slow = new Promise<void>((r) => (releaseSlow = r));
  const started = new Promise<void>((r) => (slowStarted = r));

  const routes: HttpRoute[] = [
    { method: "POST", path: "/echo", flow: "echo" },
    { method: "GET", path: "/users/:id", flow: "users.get" },
    { method: "PUT", path: "/users/:id", flow: "users.put" },
    { method: "GET", path: "/nothing", flow: "nothing" },
    { method: "GET", path: "/null", flow: "null" },
    { method: "POST", path: "/park", flow: "park" },
    { method: "GET", path: "/boom", flow: "boom" },
    { method: "GET", path: "/conflict", flow: "conflict" },
    { method: "GET", path: "/bigint", flow: "bigint" },
    { method: "GET", path: "/slow", flow: "slow" },
    { method: "GET", path: "/_/health", flow: "shadow" },
  ];

  const run = async (route: HttpRoute, req: RouteRequest): Promise<unknown> => {
    switch (route.flow) {
      case "echo": {
        const body = req.body as { name?: unknown } | undefined;
        if (typeof body?.name !== "string") {
          throw new OkeError({
            code: "OKE1422",
            status: 422,
            message: 'Invalid input for flow "echo"',
            details: [{ path: "name", message: "Expected string" }],
          });
        }
        return { hello: body.name };
      }
      case "users.get":
        return { id: req.params.id, query: req.query };
      case "users.put":
        return { id: req.params.id, body: req.body };
      case "null":
        return null;
      case "boom":
        throw new Error("secret: password=hunter2");
      case "conflict":
        throw new OkeError({
          code: "OKE2409",
          status: 409,
          message: "Order already paid",
          fix: "Refresh the order.",
        });
      case "bigint":
        return { n: 1n };
      case "slow":
        slowStarted();
        await slow;
        return { slow: true };
      case "shadow":
        return { shadowed: true };
      default:
        return undefined;
    }
  };

  const app: FakeApp = {
    logger,
    manifest: { routes },
    calls,
    logs,
    ready: { ready: true },
    waitForLog,
    releaseSlow: () => releaseSlow(),
    slowStarted: started,
    readiness: () => app.ready,
    async invokeRoute(route, request): Promise<InvokeResult> {
      calls.push({ route, request });
      if (route.flow === "park") return { kind: "parked", runId: "run-1" };
      return { kind: "returned", value: await run(route, request) };
    },
  };
  return app;
}
