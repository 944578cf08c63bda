/** Send drivers behind fx.send: console, memory (tests) and webhook. */
import type { Channel, SendDriverName } from "../channel/channel.ts";
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";

export interface SentMessage {
  channel: string;
  payload: unknown;
  at: number;
}

/** The variable a channel's url is read from by convention (the starter's `email` reads EMAIL_WEBHOOK_URL). */
function webhookUrlVariable(channelName: string): string {
  const v = `${channelName.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}_WEBHOOK_URL`;
  return /^[0-9]/.test(v) ? `CHANNEL_${v}` : v;
}

/** The fix of a webhook channel without a url, in OKE1270 and in boot's warning. */
const urlFix = (name: string): string =>
  `Give it a url, e.g. channel(${JSON.stringify(name)}, { url: process.env.${webhookUrlVariable(name)} }) with that variable set, or pin another driver: { driver: "console" }`;

/** Delivers fx.send payloads. `memory` keeps them for tests (app.sent). */
export class SendDrivers {
  readonly sent: SentMessage[] = [];

  /**
   * `channels`: the app's, checked once here. One that resolves to the webhook driver with no url
   * gets a warning at boot: otherwise the app serves HTTP fine and the first sign is a dead letter.
   */
  constructor(
    private readonly defaultDriver: SendDriverName,
    private readonly logger: Logger,
    channels: Iterable<Channel> = [],
  ) {
    for (const ch of channels) {
      if ((ch.driver ?? defaultDriver) !== "webhook" || ch.url !== undefined) continue;
      const pickedBy = ch.driver === undefined ? "drivers.send, the default in prod" : "its driver option";
      logger.warn(
        { channel: ch.name, driver: "webhook", code: "OKE1270" },
        `okengine: channel "${ch.name}" sends by webhook (${pickedBy}) but has no url: every fx.send to it will fail with OKE1270 (in a worker: retried, then a dead letter). ${urlFix(ch.name)}.`,
      );
    }
  }

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
        fix: `${urlFix(ch.name)}.`,
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
      // Drain the body so the socket returns to the pool; a body that outlives timeoutMs is a timeout too.
      await res.arrayBuffer();
    } catch (e) {
      const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
      // fetch says only "fetch failed"; why (refused, DNS, TLS) is its cause.
      const cause = (e as { cause?: { message?: unknown; code?: unknown } } | undefined)?.cause;
      const text = (v: unknown): string => (typeof v === "string" ? v : "");
      const why = text(cause?.message) || text(cause?.code);
      throw new OkeError({
        code: "OKE1271",
        message: timedOut
          ? `Channel "${ch.name}": webhook timed out after ${ch.timeoutMs} ms`
          : `Channel "${ch.name}": webhook failed: ${(e as Error).message}${why === "" ? "" : ` (${why})`}`,
        cause: e,
      });
    }
    if (!res.ok)
      throw new OkeError({
        code: "OKE1272",
        message: `Channel "${ch.name}": webhook answered ${res.status}`,
      });
  }
}
