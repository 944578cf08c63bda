/** app.request(): turns a path or Request into the Request the handler's fetch takes. */
/**
 * The Request a real client sends for this call: a bare path gets a local origin, and the body its
 * own content type as fetch gives it — a string is text/plain, which a JSON route answers with 415
 * as it would over HTTP, so JSON needs `content-type: application/json`, as from a browser. A test
 * that passes through app.request() then passes against a real client too.
 */
export function toRequest(input: string | Request, init?: RequestInit): Request {
  if (typeof input !== "string") return init === undefined ? input : new Request(input, init);
  const url = /^https?:\/\//i.test(input)
    ? input
    : `http://localhost${input.startsWith("/") ? "" : "/"}${input}`;
  return new Request(url, init);
}
