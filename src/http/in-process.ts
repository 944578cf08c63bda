/** app.request(): turns a path or Request into the Request the handler's fetch takes. */
/**
 * Builds the Request that app.request() hands to the handler's fetch:
 * a bare path gets a local origin, and a string body without a content-type
 * is sent as JSON (the Request constructor would otherwise label it
 * text/plain, which the HTTP layer answers with 415).
 */
export function toRequest(input: string | Request, init?: RequestInit): Request {
  if (typeof input !== "string") return init === undefined ? input : new Request(input, init);
  const url = /^https?:\/\//i.test(input)
    ? input
    : `http://localhost${input.startsWith("/") ? "" : "/"}${input}`;
  const headers = new Headers(init?.headers);
  if (typeof init?.body === "string" && !headers.has("content-type"))
    headers.set("content-type", "application/json");
  return new Request(url, { ...init, headers });
}
