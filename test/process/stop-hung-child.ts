// A real app process on the file driver whose only handler never settles, for the stop-deadline test.
/**
 * Store: the file driver in OKE_FILE_DIR. One once signal whose consumer never resolves. Emits one
 * message, waits until the handler runs, then `app.stop({ timeoutMs: 300 })`. Prints JSON lines like
 * child-app.ts: `handling`, then `stop-resolved` once stop() returns; the stop log line goes to stderr.
 */
import { pino } from "pino";
import { createApp, flow, on, signal } from "../../src/index.ts";

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const jobs = signal.once("hung.jobs");
let handling: () => void = () => undefined;
const started = new Promise<void>((r) => (handling = r));
const app = createApp({
  modules: [
    {
      jobs,
      consumer: on(
        jobs,
        flow("hung.jobs", {
          do: () => {
            handling();
            return new Promise<void>(() => undefined); // never settles, holds no handle
          },
        }),
      ),
    },
  ],
  env: "prod",
  config: { drivers: { journal: "file" }, file: { dir: process.env.OKE_FILE_DIR! } },
  logger: pino({ level: "info" }, process.stderr),
});
await app.boot();
await app.emit(jobs, {});
await started;
say({ event: "handling" });
await app.stop({ timeoutMs: 300 });
say({ event: "stop-resolved" });
