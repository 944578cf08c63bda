/** Send drivers behind fx.send: console, memory (tests) and webhook. */
import type { Channel, SendDriverName } from "../channel/channel.ts";
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";

export interface SentMessage {
  channel: string;
  payload: unknown;
  at: number;
}

/** Delivers fx.send payloads. `memory` keeps them for tests (app.sent). */
export class SendDrivers {
  readonly sent: SentMessage[] = [];

  constructor(
    private readonly defaultDriver: SendDriverName,
    private readonly logger: Logger,
  ) {}

  async send(ch: Channel, payload: unknown, at: number): Promise<void> {
    const driver = ch.driver ?? this.defaultDriver;
    switch (driver) {
      case "memory":
        this.sent.push({ channel: ch.name, payload: structuredClone(payload), at });
        return;
      case "console":
        this.logger.info({ channel: ch.name, payload }, `send ${ch.name}`);
        return;
      case "webhook":
        return this.webhook(ch, payload);
    }
  }

  private async webhook(ch: Channel, payload: unknown): Promise<void> {
    if (!ch.url) {
      throw new OkeError({
        code: "OKE1270",
        message: `Channel "${ch.name}" uses the webhook driver but has no url.`,
        fix: `channel("${ch.name}", { url: "https://…" })`,
      });
    }
    let res: Response;
    try {
      res = await fetch(ch.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ channel: ch.name, payload }),
        signal: AbortSignal.timeout(ch.timeoutMs),
      });
    } catch (e) {
      const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
      throw new OkeError({
        code: "OKE1271",
        message: timedOut
          ? `Channel "${ch.name}": webhook timed out after ${ch.timeoutMs} ms`
          : `Channel "${ch.name}": webhook failed: ${(e as Error).message}`,
        cause: e,
      });
    }
    // Drain the body so the socket returns to the pool.
    await res.arrayBuffer();
    if (!res.ok)
      throw new OkeError({
        code: "OKE1272",
        message: `Channel "${ch.name}": webhook answered ${res.status}`,
      });
  }
}
