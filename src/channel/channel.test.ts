// channel(): its options and defaults, and a url read from an environment variable that may be unset or empty.
import { describe, expect, it } from "vitest";
import { channel } from "./channel.ts";

describe("channel()", () => {
  it("defaults: no schema, no driver of its own, no url, 10 s timeout, described by its name", () => {
    const ch = channel("email");
    expect([ch.schema, ch.driver, ch.url, ch.timeoutMs, ch.description]).toEqual([
      undefined,
      undefined,
      undefined,
      10_000,
      "email",
    ]);
  });

  it("reads an empty url (a variable set to nothing) as no url, and refuses one that is not a URL", () => {
    expect(channel("a", { url: "" }).url).toBeUndefined();
    expect(channel("b", { url: undefined }).url).toBeUndefined();
    expect(channel("c", { url: "https://mail.example/send" }).url).toBe("https://mail.example/send");
    expect(() => channel("d", { url: "not a url" })).toThrow('channel("d"): url is not a valid URL');
  });

  it("refuses an unknown option, driver or timeout where it is declared", () => {
    expect(() => channel("e", { uri: "https://x" } as never)).toThrow('channel("e"): unknown option "uri"');
    expect(() => channel("e", { driver: "smtp" } as never)).toThrow('unknown driver "smtp"');
    expect(() => channel("e", { timeoutMs: 0 })).toThrow("timeoutMs must be a positive integer");
  });
});
