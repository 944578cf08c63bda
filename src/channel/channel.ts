/** channel(): declares an outbound destination for fx.send (console, memory, webhook). */
import { isSchema, type StandardSchemaV1 } from "../schema.ts";

export type SendDriverName = "console" | "memory" | "webhook";

/** `P`: what the driver sends (the schema's output); `In`: what `fx.send` takes (the schema's input). */
export interface ChannelOptions<P, In = P> {
  /** Payload contract, checked at `fx.send` (OKE1265 when it does not match). Default: none. */
  schema?: StandardSchemaV1<In, P>;
  /** Overrides the app's `drivers.send` (console in dev, memory in test, webhook in prod) for this channel. */
  driver?: SendDriverName;
  /**
   * Where the webhook driver POSTs `{ channel, payload }` as JSON. Read it from the environment
   * (`url: process.env.EMAIL_WEBHOOK_URL`): unset or `""` means no url, and then every send by
   * webhook fails with OKE1270 (boot warns). Ignored by the console and memory drivers.
   */
  url?: string | undefined;
  /** How long the webhook driver waits for the answer, in ms (OKE1271 after it). Default 10 000. */
  timeoutMs?: number;
  /** Shown in the manifest. Default: the name. */
  description?: string;
}

/**
 * `P`: the payload as sent (the schema's output); `In`: what `fx.send` takes (the schema's input),
 * where `unknown` (the default) means `P`. `In` only widens, so `Channel<P>` accepts every channel of `P`.
 */
export interface Channel<P = unknown, In = unknown> {
  readonly kind: "channel";
  readonly name: string;
  readonly schema: StandardSchemaV1<In, P> | undefined;
  readonly driver: SendDriverName | undefined;
  readonly url: string | undefined;
  readonly timeoutMs: number;
  readonly description: string;
  readonly __payload?: P;
  /** Phantom: the send's input type, for inference only. */
  readonly __send?: In;
}

const KEYS = new Set(["schema", "driver", "url", "timeoutMs", "description"]);

/** Declares an outbound message template (email, webhook …) for `fx.send`. */
export function channel<P = unknown, In = P>(
  name: string,
  options: ChannelOptions<P, In> = {},
): Channel<P, In> {
  if (typeof name !== "string" || name.trim() === "")
    throw new TypeError("channel(name): name must be a non-empty string");
  const where = `channel("${name}")`;
  for (const k of Object.keys(options))
    if (!KEYS.has(k)) throw new TypeError(`${where}: unknown option "${k}"`);
  if (options.schema !== undefined && !isSchema(options.schema))
    throw new TypeError(`${where}: schema must be a Standard Schema`);
  if (options.driver !== undefined && !["console", "memory", "webhook"].includes(options.driver)) {
    throw new TypeError(
      `${where}: unknown driver "${String(options.driver)}" (expected console · memory · webhook)`,
    );
  }
  // An environment variable set to nothing (`EMAIL_WEBHOOK_URL=` in an env file) is no url, not a bad one.
  const url = options.url === "" ? undefined : options.url;
  if (url !== undefined) {
    try {
      new URL(url);
    } catch {
      throw new TypeError(`${where}: url is not a valid URL: ${url}`);
    }
  }
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
    throw new TypeError(`${where}: timeoutMs must be a positive integer`);
  return Object.freeze({
    kind: "channel",
    name,
    schema: options.schema,
    driver: options.driver,
    url,
    timeoutMs,
    description: options.description ?? name,
  });
}

export const isChannel = (v: unknown): v is Channel =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "channel";
