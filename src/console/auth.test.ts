// ConsoleAuth's failure limiter: ten failed sign-ins from one address lock it for the minute, and the lockout is said once.
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { ConsoleAuth } from "./auth.ts";

const TOKEN = "right-token-0123456789";
const req = (addr: string, token: string): IncomingMessage =>
  ({
    socket: { remoteAddress: addr },
    headers: { authorization: `Bearer ${token}` },
  }) as unknown as IncomingMessage;
const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code;
  }
};

describe("ConsoleAuth lockout", () => {
  it("says the lockout once per address and window, naming the address and the count", () => {
    let now = 1_000_000;
    const said: Array<[string, number]> = [];
    const auth = new ConsoleAuth(
      new Map([["alice", TOKEN]]),
      false,
      () => now,
      (addr, n) => said.push([addr, n]),
    );
    for (let i = 0; i < 10; i++)
      expect(codeOf(() => auth.authenticate(req("10.0.0.9", `bad-${i}`)))).toBe("OKE1602");
    expect(said).toEqual([["10.0.0.9", 10]]);
    // Locked: the right token waits too, and nothing more is said.
    expect(codeOf(() => auth.authenticate(req("10.0.0.9", TOKEN)))).toBe("OKE1604");
    expect(codeOf(() => auth.authenticate(req("10.0.0.9", "bad-again")))).toBe("OKE1604");
    expect(said).toHaveLength(1);
    // Another address is not affected; after the minute the address signs in again.
    expect(auth.authenticate(req("10.0.0.7", TOKEN))).toEqual({ label: "alice" });
    now += 60_000;
    expect(auth.authenticate(req("10.0.0.9", TOKEN))).toEqual({ label: "alice" });
  });
});
