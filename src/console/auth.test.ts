// ConsoleAuth: the failed-sign-in limit, trusted proxies, and browser sessions (bounded, per-port cookie).
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { checkSameSite, clientAddress, ConsoleAuth, MAX_SESSIONS, sessionCookieName } from "./auth.ts";

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

describe("behind trusted proxies (console.trustProxy)", () => {
  const via = (socket: string, headers: Record<string, string>): IncomingMessage =>
    ({ socket: { remoteAddress: socket }, headers }) as unknown as IncomingMessage;

  it("counts the address the trusted proxy saw, never the entries a client can write", () => {
    const fwd = (xff: string) => via("10.0.0.1", { "x-forwarded-for": xff });
    expect(clientAddress(fwd("203.0.113.7"), 0)).toBe("10.0.0.1");
    expect(clientAddress(fwd("203.0.113.7"), 1)).toBe("203.0.113.7");
    // A client writing its own X-Forwarded-For: the proxy appends what it saw, and only that counts.
    expect(clientAddress(fwd("1.2.3.4, 203.0.113.7"), 1)).toBe("203.0.113.7");
    // Two proxies: the farther one's entry.
    expect(clientAddress(fwd("1.2.3.4, 203.0.113.7, 10.0.0.2"), 2)).toBe("203.0.113.7");
    expect(clientAddress(via("10.0.0.1", {}), 1)).toBe("10.0.0.1");
  });

  it("ten bad tokens from one client behind the proxy lock that client out, not every operator", () => {
    const auth = new ConsoleAuth(new Map([["alice", TOKEN]]), false, () => 1_000, undefined, 1);
    const from = (client: string, token: string) =>
      via("10.0.0.1", { "x-forwarded-for": client, authorization: `Bearer ${token}` });
    for (let i = 0; i < 10; i++)
      expect(codeOf(() => auth.authenticate(from("198.51.100.9", `bad-${i}`)))).toBe("OKE1602");
    expect(codeOf(() => auth.authenticate(from("198.51.100.9", TOKEN)))).toBe("OKE1604");
    expect(auth.authenticate(from("203.0.113.7", TOKEN))).toEqual({ label: "alice" });
  });

  it("checks a page's action against X-Forwarded-Host when the proxy rewrote Host", () => {
    const post = (headers: Record<string, string>) =>
      via("10.0.0.1", {
        "x-oke-console": "1",
        origin: "https://console.example.com",
        host: "127.0.0.1:6533",
        ...headers,
      });
    expect(codeOf(() => checkSameSite(post({}), false, 0))).toBe("OKE1603");
    expect(codeOf(() => checkSameSite(post({ "x-forwarded-host": "console.example.com" }), false, 0))).toBe(
      "OKE1603",
    );
    expect(
      codeOf(() => checkSameSite(post({ "x-forwarded-host": "console.example.com" }), false, 1)),
    ).toBeUndefined();
    expect(codeOf(() => checkSameSite(post({ "x-forwarded-host": "evil.example" }), false, 1))).toBe(
      "OKE1603",
    );
  });
});

describe("browser sessions", () => {
  const noAddr = { socket: { remoteAddress: "127.0.0.1" }, headers: {} } as unknown as IncomingMessage;
  const withCookie = (auth: ConsoleAuth, sid: string): IncomingMessage =>
    ({
      socket: { remoteAddress: "127.0.0.1" },
      headers: { cookie: `other=1; ${auth.cookieName}=${sid}` },
    }) as unknown as IncomingMessage;

  it("keeps at most MAX_SESSIONS: signing in past it ends the oldest, the newest stay signed in", () => {
    const auth = new ConsoleAuth(new Map([["alice", TOKEN]]), false, () => 1_000);
    const sids = Array.from({ length: MAX_SESSIONS + 5 }, () => auth.login(noAddr, TOKEN).sid);
    expect(auth.liveSessions).toBe(MAX_SESSIONS);
    for (const sid of sids.slice(0, 5))
      expect(codeOf(() => auth.authenticate(withCookie(auth, sid)))).toBe("OKE1601");
    expect(auth.authenticate(withCookie(auth, sids[5]!))).toEqual({ label: "alice" });
    expect(auth.authenticate(withCookie(auth, sids.at(-1)!))).toEqual({ label: "alice" });
  });

  it("drops expired sessions at the next sign-in even when their cookie never comes back", () => {
    let now = 1_000;
    const auth = new ConsoleAuth(new Map([["alice", TOKEN]]), false, () => now);
    for (let i = 0; i < 50; i++) auth.login(noAddr, TOKEN);
    now += 12 * 3_600_000 + 1;
    const fresh = auth.login(noAddr, TOKEN).sid;
    expect(auth.liveSessions).toBe(1);
    expect(auth.authenticate(withCookie(auth, fresh))).toEqual({ label: "alice" });
  });

  it("names the cookie after the Console's port, so two Consoles on one host keep their own sessions", () => {
    expect(sessionCookieName(6533)).toBe("oke_console_6533");
    const a = new ConsoleAuth(new Map([["alice", TOKEN]]), false, () => 1_000);
    const b = new ConsoleAuth(new Map([["alice", TOKEN]]), false, () => 1_000);
    a.cookieName = sessionCookieName(6533);
    b.cookieName = sessionCookieName(6543);
    const sa = a.login(noAddr, TOKEN).sid;
    const sb = b.login(noAddr, TOKEN).sid;
    // The browser sends both cookies to both ports: each Console reads its own.
    const both = {
      socket: { remoteAddress: "127.0.0.1" },
      headers: { cookie: `oke_console_6533=${sa}; oke_console_6543=${sb}` },
    } as unknown as IncomingMessage;
    expect(a.authenticate(both)).toEqual({ label: "alice" });
    expect(b.authenticate(both)).toEqual({ label: "alice" });
    expect(a.sessionCookie(sa, false)).toMatch(/^oke_console_6533=/);
  });
});
