/** A TCP proxy in front of the shared PostgreSQL that a test can cut and restore, to stage an outage without stopping the server. */
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Drops every connection and refuses new ones until restore(). */
  cut(): Promise<void>;
  /** Accepts connections again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
  };
  const server: Server = createServer((client) => {
    const upstream = createConnection(target);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  const listen = (port: number): Promise<void> =>
    new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as { port: number }).port;
  let listening = true;
  const stop = async (): Promise<void> => {
    if (listening) {
      listening = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    }
  };
  return {
    port,
    cut: stop,
    async restore() {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    close: stop,
  };
}

/** `url` with its host and port replaced by the proxy's. */
export function viaProxy(url: string, proxy: TcpProxy): string {
  const u = new URL(url);
  u.hostname = "127.0.0.1";
  u.port = String(proxy.port);
  return u.toString();
}
