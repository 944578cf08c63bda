// Test helper: a TCP port on the loopback that nothing listens on now (taken from the kernel, then released).
import { createServer } from "node:net";

/** A port nothing listens on now, so a server (or a restarted one) can take it, or a client finds it closed. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() =>
        typeof addr === "object" && addr !== null ? resolve(addr.port) : reject(new Error("no port")),
      );
    });
  });
