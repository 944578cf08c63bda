/* The okengine Console page: plain ES module, no build step, nothing fetched from elsewhere. */
/* global document, window, fetch, location, setTimeout, clearTimeout, URLSearchParams, FormData, Node */

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const whoLine = document.getElementById("who");
const signOutButton = document.getElementById("signout");
const POLL_MS = 2000;
// Handlers are element properties (never attributes), so a refresh can hand the fresh ones to the nodes it keeps.
const HANDLERS = ["onclick", "onsubmit", "onchange"];

/**
 * Bidi controls and invisible characters in what apps and users wrote (names, keys, error messages,
 * payloads) would reorder or hide what an operator reads: U+202E shows "gnp.exe" as "exe.png" and
 * runs the rest of the line backwards, a zero-width space makes two names look alike. They are
 * shown by code point instead (⟨U+202E⟩). ZWJ/ZWNJ stay: emoji and several scripts need them.
 */
const INVISIBLE = /[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;
const visible = (s) =>
  s.replace(INVISIBLE, (c) => `⟨U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
/** confirm() with the question's invisible characters shown: an operator confirms what they can read. */
const ask = (question) => window.confirm(visible(question));

/** Builds an element: h("a", { href: "#/" }, "text", child…). Children nest in arrays to any depth. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    // The page's CSP (style-src 'self') refuses style attributes: style with classes.
    if (k === "style") throw new Error("h(): use a class, not a style attribute");
    if (HANDLERS.includes(k)) el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity))
    if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : visible(String(c)));
  return el;
}

/** Calls the API; a refusal throws an Error carrying the API's code, message and fix. */
async function api(path, options = {}) {
  let res;
  try {
    res = await fetch(path, {
      ...options,
      credentials: "same-origin",
      headers: options.body
        ? { "content-type": "application/json", "x-oke-console": "1" }
        : { "x-oke-console": "1" },
    });
  } catch (e) {
    throw Object.assign(new Error(`the Console did not answer (${e.message})`), { network: true });
  }
  const body = await res.json().catch(() => undefined);
  if (!res.ok) {
    const err = body?.error;
    throw Object.assign(
      new Error(err ? `${err.code}: ${err.message}` : `HTTP ${res.status} ${res.statusText}`),
      { status: res.status, code: err?.code, fix: err?.fix, signIn: res.status === 401 },
    );
  }
  if (body === undefined) throw new Error(`HTTP ${res.status}: the answer is not JSON`);
  return body;
}
const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body ?? {}) });
const describe = (e) => (e.fix ? `${e.message} (${e.fix})` : e.message);
/**
 * Whether asking again may answer otherwise: the Console or its store did not answer (network, 5xx).
 * A refusal of the request itself (4xx: a bad filter or address) answers the same every time.
 */
const retryable = (e) => e.network === true || (e.status ?? 0) >= 500;

const time = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "—");
/** A schedule's slot or fire: to the millisecond when it has one (an `every("750ms")` slot), else like `time`. */
const fireTime = (ms) =>
  ms === null || ms === undefined
    ? "—"
    : new Date(ms)
        .toISOString()
        .replace("T", " ")
        .slice(0, ms % 1000 === 0 ? 19 : 23);
const age = (ms) =>
  ms === null || ms === undefined
    ? "—"
    : ms < 1000
      ? `${ms} ms`
      : ms < 60000
        ? `${Math.round(ms / 1000)} s`
        : `${Math.round(ms / 60000)} min`;
const enc = encodeURIComponent;
const link = (href, text, label) => h("a", { href, "aria-label": label }, text);
const runLink = (id) => link(`#/run/${enc(id)}`, id, `run ${id}`);
const messageLink = (id) => link(`#/message/${enc(id)}`, id, `message ${id}`);
const when = (ms) => h("td", { class: "time" }, time(ms));
const row = (key, ...cells) => h("tr", { "data-key": key }, cells);
const nextLink = (href) => h("p", {}, link(href, "Next page →", "next page"));

/**
 * A table inside its own scrolling box: a wide table never widens the page. `narrowHide`: the indexes
 * of columns a phone-width screen leaves out (class "narrow-hide"), so the ones that matter fit.
 */
function table(headers, rows, caption, narrowHide = []) {
  for (const r of rows)
    if (r.children.length === headers.length)
      for (const i of narrowHide) r.children[i].classList.add("narrow-hide");
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      caption ? h("caption", { class: "muted" }, caption) : null,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headers.map((x, i) =>
            h("th", { scope: "col", class: narrowHide.includes(i) ? "narrow-hide" : null }, x),
          ),
        ),
      ),
      h(
        "tbody",
        {},
        rows.length
          ? rows
          : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "Nothing here.")),
      ),
    ),
  );
}

/** Deliveries per minute as bars; heights are classes (b0 none … b8 the busiest minute). */
function bars(xs = []) {
  const max = Math.max(1, ...xs);
  return h(
    "span",
    { class: "bar", role: "img", "aria-label": `deliveries per minute: ${xs.join(", ")}` },
    xs.map((n) => h("span", { class: `b${n > 0 ? Math.max(1, Math.round((8 * n) / max)) : 0}` })),
  );
}

// The status line: what the last action did, or why it failed (until the next success or page).

function say(text, error = false) {
  statusLine.textContent = visible(text);
  statusLine.className = error ? "bad" : "";
}

/**
 * An operator action: `run` answers what to say when done, or null when the operator cancelled.
 * Failures go to the status line with the API's code and message; the view is re-read either way.
 */
let acting = 0;
function action(what, run) {
  return async (event) => {
    const button = event?.currentTarget;
    if (button) button.disabled = true;
    acting++;
    // What the line said was about an earlier action: a cancelled one leaves it empty, never stale.
    say("");
    let done;
    try {
      done = await run();
      if (done) say(done);
    } catch (e) {
      if (e.signIn) return showSignIn();
      say(`${what} failed: ${describe(e)}`, true);
      done = "failed";
    } finally {
      acting--;
      if (button) button.disabled = false;
    }
    // The line sits under the header: an action taken lower down scrolls up to its outcome.
    if (done && statusLine.getBoundingClientRect().top < 0) statusLine.scrollIntoView({ block: "nearest" });
    if (done) await render("action");
  };
}

/** One audit detail value as text: a time (`wakeAt` and other `…At` numbers) as the page shows times. */
const detailValue = (k, v) =>
  v === null
    ? "—"
    : typeof v === "number" && /At$/.test(k)
      ? time(v)
      : Array.isArray(v)
        ? v.join(", ")
        : typeof v === "object"
          ? JSON.stringify(v)
          : v;

/**
 * An audit entry's detail as "count 3 · all true · ids m_1, m_2": it wraps where a JSON blob would not.
 * An empty list (the ids of a replay of nothing) is left out: the count beside it already says 0.
 */
const detailText = (detail) =>
  Object.entries(detail ?? {})
    .filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k} ${detailValue(k, v)}`)
    .join(" · ");

function auditTable(items) {
  return table(
    ["When", "Who", "Action", "Target", "Detail"],
    items.map((a) =>
      row(
        `audit ${a.id ?? a.at}`,
        when(a.at),
        h("td", {}, a.actor),
        h("td", {}, a.action),
        h("td", {}, a.target),
        h("td", { class: "detail" }, detailText(a.detail)),
      ),
    ),
  );
}

// Views. Each returns a node; the router re-reads it every POLL_MS and patches what changed.

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * Work no live instance serves (runs of a flow, messages of a once signal no instance heartbeats
 * with): a warning above everything else, each entry with what waits and where to look. Nothing when
 * all is served; a note when no instance is live, so nothing could be judged.
 */
function strandedBanner(st, now) {
  if (!st) return null;
  if (!st.checked)
    return h(
      "p",
      { id: "stranded", class: "muted" },
      "No live instance heartbeats to this store: which runs and messages are stranded cannot be told.",
    );
  const clocks = st.clocks ?? []; // absent from an older app
  if (st.flows.length === 0 && st.signals.length === 0 && clocks.length === 0) return null;
  const flowItem = (f) => {
    const n = Object.values(f.runs).reduce((a, b) => a + b, 0);
    const by = Object.entries(f.runs)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
    const due = f.dueAt === null ? "" : `, ${f.dueAt <= now ? "due since" : "next due"} ${time(f.dueAt)}`;
    return h(
      "li",
      { "data-key": `stranded flow ${f.name}` },
      h("strong", {}, f.name),
      `: ${plural(n, "run")} (${by}${due}) — no live instance runs this flow. `,
      link(`#/runs?flow=${enc(f.name)}`, "See them", `stranded runs of ${f.name}`),
    );
  };
  const signalItem = (s) => {
    const parts = [s.pending > 0 ? `${s.pending} pending` : null];
    if (s.leaseLapsedAt !== null) parts.push(`${s.inflight} in flight, lease lapsed`);
    const oldest = s.oldestPendingAgeMs === null ? "" : `, oldest ${age(s.oldestPendingAgeMs)}`;
    return h(
      "li",
      { "data-key": `stranded signal ${s.name}` },
      h("strong", {}, s.name),
      `: ${parts.filter(Boolean).join(", ")}${oldest} — no live instance consumes this signal`,
      s.declared === false ? ", and this app does not declare it. " : ". ",
      link(`#/signal/${enc(s.name)}`, "See them", `stranded messages of ${s.name}`),
    );
  };
  // A clock nothing fires: active, a slot due, and no live instance declares it (its fix comes from the API).
  const clockItem = (c) =>
    h(
      "li",
      { "data-key": `stranded clock ${c.name}` },
      h("strong", {}, c.name),
      `: clock ${specText(c)}, due since ${fireTime(c.dueAt)}`,
      c.lastFiredAt === null ? ", never fired" : `, last fired ${fireTime(c.lastFiredAt)}`,
      ` — active, but no live instance declares it, so nothing fires it. ${c.fix} `,
      link("#/schedules", "See schedules", `schedule ${c.name} on the Schedules view`),
    );
  return h(
    "section",
    { id: "stranded", class: "warn", "aria-labelledby": "stranded-title" },
    h("h2", { id: "stranded-title" }, "Stranded work: no live instance serves it"),
    h("ul", {}, st.flows.map(flowItem), st.signals.map(signalItem), clocks.map(clockItem)),
    st.flows.length + st.signals.length > 0
      ? h(
          "p",
          {},
          "It waits in the store and nothing is lost: deploy an instance with the flow or the signal's worker again, and it carries on.",
        )
      : null,
  );
}

/**
 * Runs held back (RunRecord.held): running, no holder, waiting for the code that wrote their journal.
 * Shown on the overview only while there are any; `heldBack` is absent from an older app.
 */
function heldBackPanel(hb) {
  if (!hb || hb.runs.length === 0) return null;
  const item = (r) =>
    h(
      "li",
      { "data-key": `held ${r.id}` },
      runLink(r.id),
      ` (${r.flow}) held back since ${time(r.held.since)}: `,
      h("code", {}, r.held.code),
      ` ${r.held.message}`,
    );
  return h(
    "section",
    { id: "held-back", class: "warn", "aria-labelledby": "held-back-title" },
    h("h2", { id: "held-back-title" }, "Held back"),
    h(
      "p",
      {},
      `${hb.more ? `The newest ${hb.runs.length} of more runs` : plural(hb.runs.length, "run")} waiting with no holder, not failed: each was given back for the reason shown. `,
      link("#/runs?status=held", "All held-back runs", "all held-back runs"),
    ),
    h("ul", {}, hb.runs.map(item)),
    h("p", { class: "fix" }, hb.fix),
  );
}

/**
 * A flow's runs by status for the flows table. Held-back runs (`held`, counted in `runs` too) are taken
 * out of running and compensating and shown apart, linked to them, so they are not read as worked on;
 * "n+" when the overview counted the newest held-back runs only. `held` is absent from an older app.
 */
function flowRuns(f, allCounted) {
  const held = f.held ?? {};
  const nHeld = Object.values(held).reduce((a, b) => a + b, 0);
  const parts = Object.entries(f.runs)
    // Never below 0: the run counts may be read a moment before the held ones.
    .map(([k, v]) => [k, Math.max(0, v - (held[k] ?? 0)), held[k] ?? 0])
    .filter(([, v, wasHeld]) => v > 0 || wasHeld === 0)
    .map(([k, v]) => `${k} ${v}`);
  if (nHeld === 0) return parts.join(" · ") || "—";
  const count = `${nHeld}${allCounted ? "" : "+"}`;
  return [
    parts.length ? `${parts.join(" · ")} · ` : "",
    h(
      "a",
      {
        href: `#/runs?flow=${enc(f.name)}&status=held`,
        class: "held",
        "aria-label": `${allCounted ? plural(nHeld, "held-back run") : `${count} held-back runs`} of ${f.name}`,
        title: `Not worked: each waits with no holder for code that matches its journal${allCounted ? "" : " (more are held back than were counted)"}`,
      },
      `held back ${count}`,
    ),
  ];
}

/** " (1 web, 2 worker)" when an instance runs part of the app; nothing when all run everything (the default). */
function rolesText(roles) {
  if (!roles || (!roles.web && !roles.worker)) return "";
  const parts = ["web", "worker", "all"].filter((k) => roles[k] > 0).map((k) => `${roles[k]} ${k}`);
  return ` (${parts.join(", ")})`;
}

/** "1 000", "0.5": a rate or count as the page writes numbers. */
const num = (n) => n.toLocaleString("en-US", { maximumFractionDigits: 4 });

/**
 * Paced replays (a replay with a rate): progress, and Stop for one still running. What was replayed
 * stays replayed; Stop only ends the sending. `signal` set: that signal's jobs only, without the column.
 */
function replaysPanel(jobs, signal) {
  const shown = signal === undefined ? jobs : jobs.filter((j) => j.signal === signal);
  if (shown.length === 0) return null;
  const stop = (j) =>
    action(`Stop replay ${j.id}`, async () => {
      if (!ask(`Stop paced replay ${j.id} of ${j.signal}? Those replayed so far stay replayed.`)) return null;
      const out = await post(`/api/replays/${enc(j.id)}/stop`, {});
      const r = out.job;
      return out.stopped
        ? `Stopped paced replay ${r.id} of ${r.signal}: ${num(r.replayed)} of ${num(r.total)} replayed.`
        : `Paced replay ${r.id} of ${r.signal} had already ended (${r.state}).`;
    });
  return [
    h("h2", { id: "paced-replays" }, "Paced replays"),
    table(
      [
        "Job",
        ...(signal === undefined ? ["Signal"] : []),
        "Progress",
        "Rate",
        "State",
        "Next batch",
        "By",
        "",
      ],
      shown.map((j) =>
        row(
          `replay ${j.id}`,
          h("td", { class: "num" }, j.id),
          signal === undefined
            ? h("td", {}, link(`#/signal/${enc(j.signal)}`, j.signal, `signal ${j.signal}`))
            : null,
          h(
            "td",
            {},
            `${num(j.replayed)} of ${num(j.total)} replayed`,
            j.skipped > 0 ? ` (${num(j.skipped)} skipped: no longer dead)` : "",
          ),
          h("td", {}, j.rate >= 1 ? `${num(j.rate)}/s` : `one every ${num(1 / j.rate)} s`),
          h("td", { class: j.state === "failed" ? "bad" : "" }, j.state, j.error ? `: ${j.error}` : ""),
          when(j.nextAt),
          h("td", {}, j.actor),
          h(
            "td",
            {},
            j.state === "running"
              ? h(
                  "button",
                  { type: "button", class: "danger", onclick: stop(j), "aria-label": `stop replay ${j.id}` },
                  "Stop",
                )
              : "",
          ),
        ),
      ),
    ),
  ];
}

async function overview() {
  const [o, replays] = await Promise.all([api("/api/overview"), api("/api/replays")]);
  const audit = Array.isArray(o.audit) ? o.audit : (await api("/api/audit?limit=10")).items;
  return h(
    "div",
    {},
    h("h1", {}, "Overview"),
    strandedBanner(o.stranded, o.now),
    heldBackPanel(o.heldBack),
    h("h2", {}, "Signals"),
    table(
      [
        "Signal",
        "Delivery",
        "Pending",
        "In flight",
        "Dead",
        "Delivered",
        "Oldest pending",
        "Delivered, last 10 min",
      ],
      o.signals.flatMap((s) => [
        row(
          `signal ${s.name}`,
          h(
            "td",
            {},
            s.delivery === "live" ? s.name : link(`#/signal/${enc(s.name)}`, s.name, `signal ${s.name}`),
          ),
          h("td", {}, s.schedule !== undefined ? "clock" : s.delivery),
          h("td", { class: "num" }, s.pending ?? "—"),
          h("td", { class: "num" }, s.inflight ?? "—"),
          h("td", { class: `num${s.dead ? " bad" : ""}` }, s.dead ?? "—"),
          h("td", { class: "num" }, s.delivered ?? "—"),
          h("td", {}, age(s.oldestPendingAgeMs)),
          h("td", {}, bars(s.throughput?.delivered)),
        ),
        // A broadcast signal's per-flow copy queues, under it and labelled — never as signals.
        ...(s.copies ?? []).map((c) =>
          row(
            `copies ${s.name} ${c.flow}`,
            h(
              "td",
              { class: "copies" },
              "↳ ",
              link(`#/signal/${enc(c.queue)}`, `copies for ${c.flow}`, `copies for ${c.flow} of ${s.name}`),
            ),
            h("td", {}, "copies"),
            h("td", { class: "num" }, c.pending),
            h("td", { class: "num" }, c.inflight),
            h("td", { class: "num" }, c.dead),
            // A failed copy is settled delivered (broadcast neither retries nor dead-letters): said here.
            h(
              "td",
              { class: "num" },
              c.delivered,
              c.failed > 0 ? h("div", { class: "bad copies-failed" }, failedText(c)) : null,
            ),
            h("td", {}, age(c.oldestPendingAgeMs)),
            h("td", {}, ""),
          ),
        ),
      ]),
      undefined,
      // On a phone the counts come right after the name; the kind of delivery is the one left out.
      [1],
    ),
    replaysPanel(replays.jobs),
    h("h2", {}, "Flows"),
    table(
      ["Flow", "Triggers", "Durable", "Runs"],
      o.flows.map((f) =>
        row(
          `flow ${f.name}`,
          h("td", {}, f.durable ? link(`#/runs?flow=${enc(f.name)}`, f.name, `runs of ${f.name}`) : f.name),
          h("td", {}, f.triggers.join(", ")),
          h("td", {}, f.durable ? "yes" : "no"),
          h("td", {}, flowRuns(f, o.heldBack?.allCounted !== false)),
        ),
      ),
    ),
    h("h2", {}, "Recent failures"),
    table(
      ["When", "What", "Failure"],
      // Dead letters and failed runs come as two lists: one table, newest failure (the time shown) first.
      [
        ...o.recentFailures.deadLetters.map((m) => ({
          at: m.updatedAt,
          row: () =>
            row(
              `dead ${m.id}`,
              when(m.updatedAt),
              h("td", {}, "dead letter ", messageLink(m.id), ` on ${m.signal}`),
              h("td", { class: "bad" }, m.failures.at(-1)?.message ?? ""),
            ),
        })),
        ...(o.recentFailures.copies ?? []).map((m) => ({
          at: m.updatedAt,
          row: () =>
            row(
              `copy ${m.id}`,
              when(m.updatedAt),
              h(
                "td",
                {},
                "broadcast copy ",
                messageLink(m.id),
                m.copyOf ? ` of ${m.copyOf.signal} for ${m.copyOf.flow}` : ` on ${m.signal}`,
              ),
              h("td", { class: "bad" }, m.failures.at(-1)?.message ?? ""),
            ),
        })),
        ...o.recentFailures.runs.map((r) => ({
          at: r.updatedAt,
          row: () =>
            row(
              `run ${r.id}`,
              when(r.updatedAt),
              h("td", {}, "run ", runLink(r.id), ` of ${r.flow}`),
              h("td", { class: "bad" }, r.error?.message ?? ""),
            ),
        })),
      ]
        .sort((a, b) => b.at - a.at)
        .map((f) => f.row()),
    ),
    h("h2", {}, "Audit log"),
    auditTable(audit.slice(0, 10)),
    h("p", {}, link("#/audit", "The whole audit log →", "the whole audit log")),
    h(
      "p",
      { class: "muted", id: "instances-alive" },
      `${o.instances} instance(s) alive${rolesText(o.instanceRoles)} · env ${o.env}`,
    ),
  );
}

/** "3 failed" (or "3 failed of the last 100" when the Console read a full page of copies). */
const failedText = (c) =>
  `${c.failed} failed${c.failedOf !== undefined && c.failed < c.failedOf ? ` of the last ${c.failedOf}` : ""}`;

/** A broadcast or live signal has no queue: what it has instead, and where to see it. */
function noQueueView(s) {
  if (s.delivery === "live")
    return h(
      "div",
      {},
      h("h1", {}, `Signal ${s.name}`),
      h(
        "p",
        { id: "no-queue" },
        `${s.name} is a live signal: it keeps a tape of entries, not a queue of messages, and the Console does not list tapes. `,
        "Its entries are read by app.live() or a route returning fx.live().",
      ),
    );
  return h(
    "div",
    {},
    h("h1", {}, `Signal ${s.name}`),
    h(
      "p",
      { id: "no-queue" },
      `${s.name} is a broadcast signal: it has no queue of its own. Each subscribed flow gets its own copies; `,
      "a copy is run once, never retried, and a failed one is settled delivered with its failure.",
    ),
    table(
      ["Copies", "Pending", "In flight", "Delivered", "Failed", "Oldest pending"],
      (s.copies ?? []).map((c) =>
        row(
          `copies ${s.name} ${c.flow}`,
          h(
            "td",
            {},
            link(`#/signal/${enc(c.queue)}`, `copies for ${c.flow}`, `copies for ${c.flow} of ${s.name}`),
          ),
          h("td", { class: "num" }, c.pending),
          h("td", { class: "num" }, c.inflight),
          h("td", { class: "num" }, c.delivered),
          h(
            "td",
            { class: `num${c.failed > 0 ? " bad" : ""}` },
            c.failed > 0 ? failedText(c) : (c.failed ?? "—"),
          ),
          h("td", {}, age(c.oldestPendingAgeMs)),
        ),
      ),
    ),
  );
}

async function signalView(name, params) {
  const cursor = params.get("cursor");
  const s = await api(`/api/signals/${enc(name)}`);
  if (s.delivery === "broadcast" || s.delivery === "live") return noQueueView(s);
  // A copies queue holds no dead letters (broadcast never dead-letters): its delivered copies show first.
  const copies = s.delivery === "copies";
  const status = params.get("status") ?? (copies ? "delivered" : "dead");
  const [page, replays] = await Promise.all([
    api(
      `/api/signals/${enc(name)}/messages?status=${enc(status)}&limit=50${cursor ? `&cursor=${enc(cursor)}` : ""}`,
    ),
    api("/api/replays"),
  ]);
  const picks = () => [...main.querySelectorAll("input[name=pick]:checked")];
  const pickable = status === "dead" || (status === "pending" && !copies);
  // verb: replay, discard (dead letters) or discard-pending (the pending tab's messages).
  const act = (verb, all) =>
    action(`${verb === "replay" ? "Replay" : "Discard"}${all ? " all" : ""}`, async () => {
      const ids = picks().map((i) => i.value);
      if (!all && ids.length === 0) return "Select messages first.";
      const target = all ? { all: true } : { ids };
      const url = `/api/signals/${enc(name)}/${verb}`;
      const dry = await post(url, { ...target, dryRun: true });
      const kind = verb === "discard-pending" ? "pending message(s)" : "dead letter(s)";
      if (dry.count === 0)
        return `No ${verb === "discard-pending" ? "pending messages" : "dead letters"} to ${verb === "replay" ? "replay" : "discard"} on ${name}.`;
      const question =
        verb === "replay"
          ? `Replay ${all ? "all " : ""}${dry.count} dead letter(s) of ${name}?`
          : verb === "discard"
            ? `Discard ${all ? "all " : ""}${dry.count} dead letter(s) of ${name}? They are deleted for good.`
            : `Discard ${all ? "all " : ""}${dry.count} ${kind} of ${name}? They are deleted for good and never delivered` +
              (dry.backlog?.liveConsumer
                ? " (a live instance consumes this signal: it may deliver some first)."
                : ".");
      if (!ask(dry.more ? `${question} (The first ${dry.count}; run it again for the rest.)` : question))
        return null;
      const done = await post(url, target);
      for (const box of picks()) box.checked = false;
      return `${verb === "replay" ? "Replayed" : "Discarded"} ${(done.replayed ?? done.discarded).length} ${verb === "discard-pending" ? "pending " : ""}message(s) of ${name}.`;
    });
  // A replay with a rate: the dead letters go back a few at a time in the background (a worker that
  // failed them all on a dependency now back would otherwise get the whole backlog at once).
  const paced = action("Replay all at a pace", async () => {
    const answer = window.prompt(
      visible(`Replay all dead letters of ${name} at how many a second? (0.5 is one every 2 s)`),
      "10",
    );
    if (answer === null) return null;
    // Anything but a number goes as null, and the API's refusal says what it accepts.
    const rate = answer.trim() === "" ? null : Number(answer.trim());
    const url = `/api/signals/${enc(name)}/replay`;
    const dry = await post(url, { all: true, dryRun: true, rate });
    if (dry.count === 0) return `No dead letters to replay on ${name}.`;
    const question = `Replay ${dry.count} dead letter(s) of ${name} at ${num(rate)} a second, in the background?`;
    if (!ask(dry.more ? `${question} (The first ${dry.count}; run it again for the rest.)` : question))
      return null;
    const { job } = await post(url, { all: true, rate });
    return `Replaying ${num(job.total)} dead letter(s) of ${name} at ${num(job.rate)} a second (job ${job.id}); its progress is under Paced replays.`;
  });
  return h(
    "div",
    {},
    h("h1", {}, copies ? `Copies of ${s.copiesOf.signal} for ${s.copiesOf.flow}` : `Signal ${name}`),
    copies
      ? h(
          "p",
          { class: "muted" },
          "Broadcast copies: each runs once, never retried; a failed one is settled delivered with its failure. ",
          link(
            `#/signal/${enc(s.copiesOf.signal)}`,
            `All copies of ${s.copiesOf.signal}`,
            `signal ${s.copiesOf.signal}`,
          ),
        )
      : null,
    h(
      "p",
      { id: "signal-counts" },
      copies
        ? `pending ${s.pending} · in flight ${s.inflight} · delivered ${s.delivered} · ${failedText(s)} · oldest pending ${age(s.oldestPendingAgeMs)} · `
        : `pending ${s.pending} · in flight ${s.inflight} · dead ${s.dead} · delivered ${s.delivered} · oldest pending ${age(s.oldestPendingAgeMs)} · `,
      bars(s.throughput?.delivered),
    ),
    h(
      "nav",
      { "aria-label": "Message status", class: "tabs" },
      (copies ? ["delivered", "pending", "inflight"] : ["dead", "pending", "inflight", "delivered"]).map(
        (st) =>
          h(
            "a",
            { href: `#/signal/${enc(name)}?status=${st}`, "aria-current": st === status ? "page" : null },
            st === "dead" ? "Dead letters" : st === "inflight" ? "in flight" : st,
          ),
      ),
    ),
    // Messages a removed signal left behind: readable, dead letters discardable, never replayed from
    // here (a replay queues work for a worker; this app has none for it and does not know its schema).
    s.declared === false
      ? h(
          "p",
          { id: "undeclared", class: "warn" },
          `This app does not declare ${name}: these messages were left by code that is no longer deployed. `,
          "Deploy its worker again to deliver them, or discard them here (dead letters, and pending messages on the pending tab); replay needs an app that declares the signal.",
        )
      : null,
    status === "dead" && !copies
      ? h(
          "p",
          { class: "actions" },
          s.declared === false
            ? null
            : [
                h(
                  "button",
                  { class: "primary", type: "button", onclick: act("replay", false) },
                  "Replay selected",
                ),
                h("button", { type: "button", onclick: act("replay", true) }, "Replay all"),
                h("button", { type: "button", onclick: paced }, "Replay all at a pace…"),
              ],
          h(
            "button",
            { class: "danger", type: "button", onclick: act("discard", false) },
            "Discard selected",
          ),
          h("button", { class: "danger", type: "button", onclick: act("discard", true) }, "Discard all"),
        )
      : null,
    // Pending messages can be discarded too (a queue nothing consumes any more); inflight ones never.
    status === "pending" && !copies
      ? h(
          "p",
          { class: "actions" },
          h(
            "button",
            { class: "danger", type: "button", onclick: act("discard-pending", false) },
            "Discard selected",
          ),
          h(
            "button",
            { class: "danger", type: "button", onclick: act("discard-pending", true) },
            "Discard all pending",
          ),
        )
      : null,
    replaysPanel(replays.jobs, name),
    table(
      [pickable ? "Pick" : "", "Message", "Key", "Attempts", "Created", "Last failure"],
      page.items.map((m) =>
        row(
          m.id,
          h(
            "td",
            {},
            pickable
              ? h("input", {
                  type: "checkbox",
                  name: "pick",
                  value: m.id,
                  "aria-label": `select message ${m.id}`,
                })
              : "",
          ),
          h("td", {}, messageLink(m.id)),
          h("td", {}, m.key ?? "—"),
          h("td", { class: "num" }, m.attempts),
          when(m.createdAt),
          h("td", { class: m.failures.length ? "bad" : "" }, m.failures.at(-1)?.message ?? ""),
        ),
      ),
    ),
    page.next ? nextLink(`#/signal/${enc(name)}?status=${enc(status)}&cursor=${enc(page.next)}`) : null,
  );
}

/**
 * Who emitted a message: its run, linked, when the store holds one (`parentRunFound`). A plain flow's
 * invocation (an HTTP route's, a non-durable consumer's) is never stored as a run, and a durable run
 * is pruned after its retention while its dead letters stay: there is no timeline to open for those.
 */
function emitter(m) {
  if (m.parentRunFound) return ["run ", runLink(m.parentRunId)];
  return unstoredRun(m.parentRunId, "emitted-by");
}

/** A run id the store holds no run of (a flow invocation, or a pruned run): as text, never as a dead link. */
function unstoredRun(id, elementId) {
  return [
    "flow invocation ",
    h("code", { id: elementId }, id),
    " (no run stored: not durable, or pruned — no timeline)",
  ];
}

async function messageView(id) {
  const m = await api(`/api/messages/${enc(id)}`);
  // A dead letter of a signal this app does not declare can be read here but not replayed (signal view).
  // Only a hint for the button: a queue with no signal view (a broadcast copy's) keeps it, and a
  // refused replay says why in the status line.
  const declared =
    m.status !== "dead" ||
    (await api(`/api/signals/${enc(m.signal)}`).then(
      (s) => s.declared !== false,
      () => true,
    ));
  return h(
    "div",
    {},
    h("h1", {}, `Message ${m.id}`),
    h(
      "p",
      {},
      `signal `,
      // A broadcast copy's queue (~broadcast:<signal>:<flow>) has no signal view: named, not linked.
      m.signal.startsWith("~broadcast:")
        ? h("span", { id: "message-queue" }, `${m.signal} (a broadcast copy queue)`)
        : link(`#/signal/${enc(m.signal)}`, m.signal, `signal ${m.signal}`),
      ` · status `,
      h("strong", { id: "message-status" }, m.status),
      ` · attempts ${m.attempts}`,
      m.replays !== undefined ? ` · replays ${m.replays}` : "",
      m.parentRunId ? [" · emitted by ", emitter(m)] : "",
    ),
    m.status === "dead" && declared
      ? h(
          "p",
          {},
          h(
            "button",
            {
              class: "primary",
              type: "button",
              onclick: action("Replay", async () => {
                if (!ask(`Replay message ${m.id}?`)) return null;
                const r = await post(`/api/signals/${enc(m.signal)}/replay`, { ids: [m.id] });
                return `Replayed ${r.replayed.length} message(s).`;
              }),
            },
            "Replay this message",
          ),
        )
      : null,
    h("h2", {}, "Failure history"),
    table(["Attempt", "When", "Code", "Message"], historyRows(m)),
    h("h2", {}, "Payload"),
    h("pre", {}, JSON.stringify(m.payload, null, 2)),
  );
}

/**
 * A message's failure history: its failures and the attempts whose lease lapsed with no outcome
 * recorded, as the API derived them (`history`), with a line where each replayed delivery's attempts
 * begin — `oke dead` prints the same.
 */
function historyRows(m) {
  const rows = [];
  let delivery = 0;
  let failure = 0;
  for (const e of m.history ?? m.failures.map((f) => ({ ...f, outcome: "failed", delivery: 0 }))) {
    if (e.delivery !== delivery) {
      delivery = e.delivery;
      rows.push(
        h(
          "tr",
          { "data-key": `replay ${delivery}` },
          h(
            "td",
            { colspan: 4, class: "muted" },
            `— replay ${delivery}${m.replays === undefined ? "" : ` of ${m.replays}`}: attempts count from 1 again —`,
          ),
        ),
      );
    }
    rows.push(
      e.outcome === "lapsed"
        ? row(
            `lapsed ${delivery} ${e.attempt}`,
            h("td", { class: "num" }, e.attempt),
            h("td", { class: "time" }, "—"),
            h("td", { class: "muted" }, "none"),
            h("td", { class: "text" }, e.message),
          )
        : row(
            `failure ${failure++}`,
            h("td", { class: "num" }, e.attempt),
            when(e.at),
            h("td", {}, h("code", {}, e.code)),
            h("td", { class: "text" }, e.message),
          ),
    );
  }
  return rows;
}

/** A run's status as the lists show it: a held-back run is running (or compensating) and waits. */
const runStatus = (r) => (r.held ? `${r.status} · held back` : r.status);

async function runsView(params) {
  const q = new URLSearchParams(params);
  // "held back" is offered with the statuses; the API filters it apart (held=true).
  const held = q.get("status") === "held" || q.get("held") === "true";
  if (q.get("status") === "held") q.delete("status");
  if (held) q.set("held", "true");
  q.set("limit", "50");
  let page;
  let refused;
  try {
    page = await api(`/api/runs?${q}`);
  } catch (e) {
    // A filter the API refuses (a Since that is no time): said beside the form, the values kept to fix.
    if (e.signIn || retryable(e)) throw e;
    refused = e;
  }
  const field = (label, el) => h("label", {}, label, el);
  const form = h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        const f = new URLSearchParams();
        for (const el of e.target.elements) if (el.name && el.value) f.set(el.name, el.value);
        const hash = `#/runs?${f}`;
        // The same filters again (after a refusal): no hashchange comes, so read them here.
        if (location.hash === hash) void render("navigate");
        else location.hash = hash;
      },
    },
    field(
      "Status",
      h(
        "select",
        { name: "status" },
        [
          ["", "any"],
          ["running", "running"],
          ["held", "held back"],
          ["sleeping", "sleeping"],
          ["compensating", "compensating"],
          ["completed", "completed"],
          ["failed", "failed"],
        ].map(([value, text]) =>
          h("option", { value, selected: value === "held" ? held : params.get("status") === value }, text),
        ),
      ),
    ),
    field("Flow", h("input", { name: "flow", value: params.get("flow") ?? "" })),
    field("Sleep label", h("input", { name: "label", value: params.get("label") ?? "" })),
    field("Since (ISO)", h("input", { name: "since", value: params.get("since") ?? "" })),
    h("button", { type: "submit" }, "Filter"),
  );
  if (refused)
    return h(
      "div",
      // The same filters are refused the same way every time: no refresh until they change.
      { "data-still": "" },
      h("h1", {}, "Runs"),
      form,
      h(
        "div",
        { id: "runs-error", role: "alert" },
        h("p", { class: "bad" }, `These filters were refused: ${refused.message}`),
        refused.fix ? h("p", {}, refused.fix) : null,
      ),
    );
  return h(
    "div",
    {},
    h("h1", {}, "Runs"),
    form,
    table(
      ["Run", "Flow", "Status", "Sleeping on", "Recoveries", "Created", "Updated"],
      page.items.map((r) =>
        row(
          r.id,
          h("td", { class: "id" }, runLink(r.id)),
          h("td", {}, r.flow),
          h(
            "td",
            {
              class: r.held ? "held" : r.status === "failed" ? "bad" : "",
              title: r.held ? `${r.held.code}: ${r.held.message}` : null,
            },
            runStatus(r),
          ),
          h("td", {}, r.sleepingOn ?? ""),
          h("td", { class: r.recoveries > 0 ? "bad" : "" }, String(r.recoveries ?? 0)),
          when(r.createdAt),
          when(r.updatedAt),
        ),
      ),
    ),
    page.next
      ? nextLink(`#/runs?${new URLSearchParams({ ...Object.fromEntries(params), cursor: page.next })}`)
      : null,
  );
}

/**
 * An emit. A once message is linked while the store holds it (its status beside it); a message the
 * server looked up and found gone is named, unlinked. A broadcast or live emit has no message to
 * open: its event id is shown as text.
 */
function emitted(e) {
  const fanout = e.delivery === "broadcast" || e.delivery === "live";
  if (e.eventId || fanout) return [" · event ", h("code", {}, e.eventId ?? e.messageId), ` (${e.delivery})`];
  if (e.messageStatus) return [" · message ", messageLink(e.messageId), ` (${e.messageStatus})`];
  return [" · message ", h("code", {}, e.messageId), " (gone: pruned after delivery, or discarded)"];
}

async function runView(id, params) {
  // A long run's timeline comes as its head and tail unless the address asks for all of it.
  const whole = params.get("timeline") === "all";
  const d = await api(`/api/runs/${enc(id)}${whole ? "?timeline=all" : ""}`);
  const r = d.run;
  // A wake time the app's clock (`now`, absent from an older app) has passed is due, not pending.
  const due = d.now !== undefined && r.wakeAt !== null && r.wakeAt !== undefined && r.wakeAt <= d.now;
  // No live instance has its flow (false when one has; null when none is live, so nothing is judged).
  const stranded = d.stranded === true;
  const item = (e) =>
    h(
      "li",
      { "data-key": `entry ${e.seq}` },
      h("strong", {}, e.kind),
      ` ${e.label ?? e.name} `,
      h("span", { class: "muted" }, `at ${time(e.at)} (+${e.tookMs} ms)`),
      e.preview ? [" → ", h("code", {}, e.preview)] : null,
      e.closes
        ? h("span", { class: "muted" }, ` · ends the step (its body's effects: #${e.closes.join(", #")})`)
        : null,
      e.error ? h("span", { class: "bad" }, ` ${e.error.code}: ${e.error.message}`) : null,
      e.wakeAt ? ` · wakes ${time(e.wakeAt)} (${e.duration})` : null,
      e.messageId || e.eventId ? emitted(e) : null,
      e.childRunId ? [" · child run ", runLink(e.childRunId)] : null,
    );
  return h(
    "div",
    {},
    h("h1", {}, `Run ${r.id}`),
    h(
      "p",
      {},
      `flow ${r.flow} · status `,
      h("strong", { id: "run-status" }, r.status),
      d.sleepingOn ? ` on "${d.sleepingOn}"${due ? ", due since" : " until"} ${time(r.wakeAt)}` : "",
      r.held ? " · held back" : "",
      stranded ? " · stranded" : "",
      ` · created ${time(r.createdAt)}`,
      // Takeovers after its holder died or hung past its lease (durable.maxRecoveries bounds them).
      ` · recoveries ${r.recoveries ?? 0}`,
    ),
    // What they mean, when there were any: the time the entry after a takeover shows includes the lapse.
    d.recovered ? h("p", { id: "recovered", class: "warn" }, d.recovered) : null,
    // A wake only moves the wake time: while the run is stranded nothing would resume it (its banner says so).
    r.status === "sleeping" && !stranded
      ? h(
          "p",
          {},
          h(
            "button",
            {
              class: "primary",
              type: "button",
              onclick: action("Wake", async () => {
                if (!ask(`Wake run ${r.id} now?`)) return null;
                const w = await post(`/api/runs/${enc(r.id)}/wake`);
                return `Woken (${w.outcome}).`;
              }),
            },
            "Wake now",
          ),
        )
      : null,
    // Only when the API says a terminate would apply now (no one holds the run); absent from an older app.
    d.terminable
      ? h(
          "p",
          { id: "terminate" },
          h("input", {
            id: "terminate-reason",
            name: "terminate-reason",
            type: "text",
            maxlength: "500",
            placeholder: "reason (optional)",
            "aria-label": "Reason to terminate",
          }),
          " ",
          h(
            "button",
            {
              class: "danger",
              type: "button",
              onclick: action("Terminate", async () => {
                if (
                  !ask(`Terminate run ${r.id}? It ends failed for good (OKE1339) and its undos do not run.`)
                )
                  return null;
                const reason = main.querySelector("#terminate-reason")?.value.trim() ?? "";
                const t = await post(`/api/runs/${enc(r.id)}/terminate`, reason ? { reason } : {});
                return `Terminated run ${r.id}: ${t.run.status}.`;
              }),
            },
            "Terminate",
          ),
        )
      : null,
    stranded
      ? h(
          "section",
          { id: "run-stranded", class: "warn", "aria-labelledby": "run-stranded-title" },
          h("h2", { id: "run-stranded-title" }, `Stranded: no live instance has flow ${r.flow}`),
          r.status === "sleeping"
            ? h(
                "p",
                {},
                "Waking it would only move its wake time: nothing resumes it while no live instance has its flow, so Wake now is not offered.",
              )
            : null,
          h(
            "p",
            { class: "fix" },
            d.strandedFix ?? "It resumes once an instance that has the flow runs (deploy it again).",
          ),
        )
      : null,
    r.held
      ? h(
          "section",
          { id: "held", class: "warn", "aria-labelledby": "held-title" },
          h("h2", { id: "held-title" }, "Held back: not failed, waiting for matching code"),
          h("p", {}, `Since ${time(r.held.since)}: `, h("code", {}, r.held.code), ` ${r.held.message}`),
          h(
            "p",
            { class: "fix" },
            d.heldFix ?? "It waits with no holder, untouched, until an instance takes it again.",
          ),
        )
      : null,
    r.error ? h("p", { class: "bad" }, `${r.error.code}: ${r.error.message}`) : null,
    h("h2", {}, "Trace chain"),
    h(
      "p",
      { id: "trace-parent" },
      // A parent the store holds no run of (parentRunFound false: the HTTP request that started it, say)
      // is named as text; so is the id past the last stored ancestor.
      d.ancestors.length
        ? [
            "Parent: ",
            d.ancestors.map((a, i) => [i ? " ← " : "", runLink(a.id), ` (${a.flow})`]),
            d.unstoredParentId ? [" ← ", unstoredRun(d.unstoredParentId, "parent-unstored")] : null,
          ]
        : r.parentRunId && !d.parentRunFound
          ? ["Parent: ", unstoredRun(r.parentRunId, "parent-unstored")]
          : "No parent.",
    ),
    h(
      "p",
      { id: "trace-children" },
      d.children.length
        ? [
            "Children: ",
            d.children.map((c, i) => [i ? ", " : "", runLink(c.id), ` (${c.flow}, ${runStatus(c)})`]),
            d.moreChildren
              ? [" … ", link(`#/runs?parent=${enc(r.id)}`, "all children", `all children of run ${r.id}`)]
              : null,
          ]
        : "No children.",
    ),
    h("h2", {}, "Timeline"),
    h(
      "ol",
      { class: "timeline" },
      d.timelineOmitted
        ? [
            d.timeline.filter((e) => e.seq <= d.timelineOmitted.afterSeq).map(item),
            h(
              "li",
              { "data-key": "omitted", id: "timeline-omitted", class: "muted" },
              `… ${d.timelineOmitted.count} entries left out (after seq ${d.timelineOmitted.afterSeq}, before seq ${d.timelineOmitted.beforeSeq}) · `,
              link(
                `#/run/${enc(r.id)}?timeline=all`,
                "Show every entry",
                `every journal entry of run ${r.id}`,
              ),
            ),
            d.timeline.filter((e) => e.seq > d.timelineOmitted.afterSeq).map(item),
          ]
        : d.timeline.map(item),
    ),
    h("h2", {}, "Input"),
    h("pre", {}, JSON.stringify(r.input, null, 2)),
    r.output !== undefined ? [h("h2", {}, "Output"), h("pre", {}, JSON.stringify(r.output, null, 2))] : null,
  );
}

/** A schedule's spec as `oke schedules` prints it: "cron 0 3 * * * Europe/Paris" or "every 1h". */
const specText = (s) =>
  s.cron !== null && s.cron !== undefined ? `cron ${s.cron} ${s.timezone}` : `every ${s.every ?? "?"}`;
/** As `oke schedules`: stranded is active, due, and declared by no live instance (as the overview says). */
const scheduleState = (s) =>
  s.orphaned ? "orphaned" : s.paused ? "paused" : s.stranded ? "stranded" : "active";
/** What an action left, as `oke schedules pause|resume|reset|edit` says it. */
const scheduleOutcome = (s) => `${scheduleState(s)}, next fire ${fireTime(s.nextFireAt)}`;

/**
 * What a reset makes fire: the stored declaration, which during a rolling deploy may be another
 * version's (`declaredElsewhere`), not this instance's code's.
 */
const resetQuestion = (s) =>
  s.declaredElsewhere
    ? `Reset schedule ${s.name}? The operator's edit is dropped: the stored ${specText(s.declaredElsewhere)}, declared by another version's code, fires again (this instance's code declares ${specText(s.declared)}).`
    : `Reset schedule ${s.name}? The operator's edit is dropped: the code's ${specText(s.declared)} fires again.`;

/** The spec cell's mark: an edit in force, and/or a stored declaration that is another version's. */
function specMark(s) {
  const code = h("code", {}, specText(s.declared));
  if (!s.declaredElsewhere) return s.overridden ? [" (edited; the code says ", code, ")"] : null;
  const other = h("code", {}, specText(s.declaredElsewhere));
  return s.overridden
    ? [" (edited; other version: the store has ", other, ", this instance's code says ", code, ")"]
    : [" (other version; this instance's code says ", code, ")"];
}

async function schedulesView() {
  const { schedules } = await api("/api/schedules");
  /** pause, resume and reset: confirmed, then what the schedule is now. */
  const act = (s, verb, question, past) =>
    action(`${verb[0].toUpperCase()}${verb.slice(1)} ${s.name}`, async () => {
      if (!ask(question)) return null;
      const now = await post(`/api/schedules/${enc(s.name)}/${verb}`);
      return `${past} ${s.name}: ${scheduleOutcome(now)}.`;
    });
  const trigger = (s) =>
    action(`Trigger ${s.name}`, async () => {
      if (!ask(`Fire schedule ${s.name} now, outside its schedule? Its next slot stays where it is.`))
        return null;
      const fired = await post(`/api/schedules/${enc(s.name)}/trigger`);
      return `Triggered ${s.name}: message ${fired.messageId}.`;
    });
  const buttons = (s) => [
    s.paused
      ? h(
          "button",
          {
            type: "button",
            onclick: act(
              s,
              "resume",
              `Resume schedule ${s.name}? It fires from its next slot on; slots passed while paused are skipped.`,
              "Resumed",
            ),
          },
          `Resume ${s.name}`,
        )
      : h(
          "button",
          {
            type: "button",
            onclick: act(s, "pause", `Pause schedule ${s.name}? It stops firing until resumed.`, "Paused"),
          },
          `Pause ${s.name}`,
        ),
    // An orphaned clock is bound to no flow here: the API refuses to fire it (OKE1702).
    s.orphaned ? null : h("button", { type: "button", onclick: trigger(s) }, `Trigger ${s.name} now`),
    s.overridden
      ? h(
          "button",
          {
            type: "button",
            onclick: act(s, "reset", resetQuestion(s), "Reset"),
          },
          `Reset ${s.name}`,
        )
      : null,
  ];
  const editable = schedules.filter((s) => s.overridable && !s.orphaned);
  return h(
    "div",
    {},
    h("h1", {}, "Schedules"),
    table(
      [
        "Schedule",
        "Flow",
        "Spec",
        "State",
        "Next fire",
        "Last slot",
        "Last fired",
        "Lag",
        "Missed",
        "Last error",
        "Actions",
      ],
      schedules.map((s) =>
        row(
          `schedule ${s.name}`,
          h("td", {}, s.name),
          h("td", {}, s.flow),
          h(
            "td",
            { class: "spec" },
            h("code", {}, specText(s)),
            specMark(s),
            s.declaredElsewhereNote
              ? h("div", { class: "muted other-version" }, s.declaredElsewhereNote)
              : null,
            s.dstNotes.map((n) => h("div", { class: "muted" }, n)),
          ),
          h(
            "td",
            { class: s.orphaned || s.stranded ? "state bad" : "state" },
            scheduleState(s),
            s.orphaned ? h("div", { class: "muted" }, "no longer declared; never fires") : null,
            !s.orphaned && s.stranded
              ? h(
                  "div",
                  { class: "muted" },
                  "no live instance declares it: nothing fires it. ",
                  s.strandedFix ?? "",
                )
              : null,
          ),
          h("td", { class: "time next-fire" }, fireTime(s.nextFireAt)),
          h("td", { class: "time last-slot" }, fireTime(s.lastScheduledAt)),
          h("td", { class: "time last-fired" }, fireTime(s.lastFiredAt)),
          h("td", { class: "num lag" }, age(s.lagMs)),
          h("td", { class: `num missed${s.missedRuns > 0 ? " bad" : ""}` }, s.missedRuns),
          h(
            "td",
            { class: "bad last-error" },
            s.lastError
              ? [`${s.lastError.code}: ${s.lastError.message}`, ` (slot ${fireTime(s.lastError.slot)})`]
              : "—",
          ),
          h("td", {}, h("div", { class: "actions" }, buttons(s))),
        ),
      ),
    ),
    h(
      "p",
      { class: "muted" },
      "Times are UTC. Lag: how far the last fire was recorded behind its slot. Missed: slots the last fire stood for after downtime (it ran once). ",
      "An orphaned schedule is no longer declared by the app that last booted: it is kept with its history and never fires until declared again. ",
      "Other version: the spec in the store is another version's code's (its instance booted last, as in a rolling deploy) and fires on every instance; finish the deploy, or restart this instance to make its code's spec current.",
    ),
    editable.length > 0 ? editForm(editable) : null,
  );
}

/** Edits an overridable schedule: a new cron or interval and/or zone; it wins over the code until reset. */
function editForm(editable) {
  const field = (label, input) => h("label", {}, label, input);
  return h(
    "section",
    {},
    h("h2", { id: "edit-title" }, "Edit a schedule"),
    h(
      "form",
      {
        class: "filters edit",
        "aria-labelledby": "edit-title",
        onsubmit: (e) => {
          e.preventDefault();
          // The form on screen: a refresh hands this handler to the node it kept, never the one built here.
          const form = e.currentTarget;
          const data = new FormData(form);
          const name = data.get("schedule");
          const edit = {};
          for (const k of ["cron", "every", "timezone"]) {
            const v = String(data.get(k) ?? "").trim();
            if (v !== "") edit[k] = v;
          }
          void action(`Edit ${name}`, async () => {
            if (Object.keys(edit).length === 0) return "Give a cron, an interval or a time zone to edit.";
            const what = Object.entries(edit)
              .map(([k, v]) => `${k} "${v}"`)
              .join(", ");
            if (!ask(`Edit schedule ${name}: ${what}? It wins over the code until reset.`)) return null;
            const now = await post(`/api/schedules/${enc(name)}/edit`, edit);
            for (const k of ["cron", "every", "timezone"]) form.elements[k].value = "";
            return `Edited ${name}: ${specText(now)}, ${scheduleOutcome(now)}.`;
          })({ currentTarget: form.querySelector("button") });
        },
      },
      field(
        "Schedule",
        h(
          "select",
          { name: "schedule" },
          editable.map((s) => h("option", { value: s.name }, s.name)),
        ),
      ),
      field("Cron", h("input", { name: "cron", placeholder: "30 6 * * *" })),
      field("Every", h("input", { name: "every", placeholder: "1h" })),
      field("Time zone", h("input", { name: "timezone", placeholder: "Europe/Paris" })),
      h("button", { type: "submit" }, "Save edit"),
    ),
  );
}

async function instancesView() {
  const { instances, self } = await api("/api/instances");
  return h(
    "div",
    {},
    h("h1", {}, "Instances"),
    table(
      ["Instance", "Role", "Host", "PID", "Version", "Env", "Started", "Last heartbeat", "Runs", "Console"],
      instances.map((i) =>
        row(
          i.id,
          h("td", {}, i.id, i.id === self ? " (this one)" : ""),
          // An older app's answer has no role: its instances ran everything.
          h("td", { class: "role" }, i.role ?? "all"),
          h("td", { class: "host" }, i.host ?? "—"),
          h("td", { class: "num pid" }, i.pid ?? "—"),
          h("td", {}, `${i.version} (okengine ${i.okengineVersion})`),
          h("td", {}, i.env),
          when(i.startedAt),
          when(i.seenAt),
          h("td", {}, `${i.flows.length} flows; consumes ${i.signals.join(", ") || "—"}`),
          h("td", {}, i.console ?? "—"),
        ),
      ),
    ),
  );
}

async function auditView(params) {
  const cursor = params.get("cursor");
  const page = await api(`/api/audit?limit=50${cursor ? `&cursor=${enc(cursor)}` : ""}`);
  return h(
    "div",
    {},
    h("h1", {}, "Audit log"),
    cursor ? h("p", {}, link("#/audit", "← Newest entries", "newest entries")) : null,
    auditTable(page.items),
    page.next ? nextLink(`#/audit?cursor=${enc(page.next)}`) : null,
  );
}

function errorView(e) {
  const again = retryable(e);
  return h(
    "div",
    // A refusal (4xx, a bad address) answers the same every time: asked again only when the Console did not answer.
    { class: "error-view", "data-still": again ? null : "" },
    h("h1", {}, "Could not show this view"),
    h("p", { class: "bad", id: "view-error" }, e.message),
    e.fix ? h("p", {}, e.fix) : null,
    h(
      "p",
      { class: "muted" },
      again ? "The page tries again every 2 seconds. " : "",
      link("#/", "Back to the overview", "back to the overview"),
    ),
  );
}

function signInView(error) {
  const input = h("input", {
    type: "password",
    name: "token",
    id: "token",
    autocomplete: "current-password",
    required: true,
  });
  return h(
    "form",
    {
      "aria-labelledby": "signin-title",
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await post("/api/login", { token: input.value });
          say("");
          await render("navigate");
        } catch (err) {
          putSignIn(err.message);
        }
      },
    },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("p", {}, "This Console needs an operator token (OKE_CONSOLE_TOKEN)."),
    h("label", { for: "token" }, "Operator token", input),
    h("p", {}, h("button", { class: "primary", type: "submit" }, "Sign in")),
    error ? h("p", { class: "bad", role: "alert" }, error) : null,
  );
}

/** What an address like `#/run/<id>` needs after the view's name, and where to find one. */
const NEEDS = {
  signal: ["signal name", "Open a signal from the overview"],
  message: ["message id", "Open a message from its signal's page"],
  run: ["run id", "Open a run from the Runs view"],
};

/** The id or name a view's address carries; an address without one (`#/run/`) is refused, plainly. */
function idIn(view, id) {
  if (id !== undefined && id.trim() !== "") return id;
  const [what, where] = NEEDS[view];
  throw Object.assign(new Error(`no ${what} given in the address "${location.hash}"`), {
    fix: `${where}, or put the ${what} after #/${view}/.`,
  });
}

/** One part of the address, decoded; a broken % escape says so rather than "URI malformed". */
function decodePart(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new Error(
      `the address "${location.hash}" is not a view's address (a % escape that does not decode)`,
    );
  }
}

async function route() {
  const [path, qs] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(qs ?? "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodePart);
  switch (parts[0]) {
    case undefined:
      return overview();
    case "signal":
      return signalView(idIn("signal", parts[1]), params);
    case "message":
      return messageView(idIn("message", parts[1]));
    case "runs":
      return runsView(params);
    case "run":
      return runView(idIn("run", parts[1]), params);
    case "schedules":
      return schedulesView();
    case "instances":
      return instancesView();
    case "audit":
      return auditView(params);
    default:
      throw new Error(`no view "${location.hash}"`);
  }
}

// Refreshing in place: the fresh view is patched into the one on screen, node by node, so focus,
// ticked boxes and typed text stay where they are. Rows and links are matched by key, not position.

function keyOf(n) {
  if (n.nodeType !== 1) return `#${n.nodeType}`;
  const key =
    n.getAttribute("data-key") ??
    (n.id ||
      (n.tagName === "A"
        ? n.getAttribute("href")
        : n.tagName === "INPUT" || n.tagName === "SELECT"
          ? `${n.getAttribute("name")} ${n.type === "checkbox" ? n.getAttribute("value") : ""}`
          : ""));
  return `${n.tagName} ${key}`;
}

function patch(old, fresh) {
  if (old.nodeType !== 1) {
    if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
    return;
  }
  for (const { name } of [...old.attributes]) if (!fresh.hasAttribute(name)) old.removeAttribute(name);
  for (const { name, value } of fresh.attributes)
    if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  for (const p of HANDLERS) old[p] = fresh[p];
  patchChildren(old, [...fresh.childNodes]);
}

function patchChildren(parent, freshKids) {
  const olds = [...parent.childNodes];
  const pool = new Map();
  for (const o of olds) {
    const k = keyOf(o);
    if (!pool.has(k)) pool.set(k, []);
    pool.get(k).push(o);
  }
  const wanted = freshKids.map((f) => {
    const o = pool.get(keyOf(f))?.shift();
    if (!o) return f;
    patch(o, f);
    return o;
  });
  const keep = new Set(wanted);
  for (const o of olds) if (!keep.has(o)) o.remove();
  // Insert the new nodes around the kept ones; a kept node is moved only if the order changed.
  wanted.forEach((n, i) => {
    if (parent.childNodes[i] !== n) parent.insertBefore(n, parent.childNodes[i] ?? null);
  });
}

/** Marks each table wider than its box (data-wide): on a phone the box then says that it scrolls sideways. */
function markWide() {
  for (const box of main.querySelectorAll(".scroll"))
    box.toggleAttribute("data-wide", box.scrollWidth > box.clientWidth + 1);
}
window.addEventListener("resize", markWide);

/** Shows a view: a navigation replaces the page and moves focus to it; a refresh patches in place. */
function show(view, navigate) {
  view.setAttribute("data-key", `view ${location.hash}`);
  const current = main.firstElementChild;
  if (navigate || !current || current.getAttribute("data-key") !== view.getAttribute("data-key")) {
    main.replaceChildren(view);
    markWide();
    if (navigate) main.focus();
    return;
  }
  const focused = main.contains(document.activeElement) ? document.activeElement : null;
  const focusKey = focused && focused !== main ? keyOf(focused) + focused.textContent : null;
  patchChildren(main, [view]);
  markWide(); // the patch dropped the marks: the fresh nodes have none
  // A focused node that had to be moved or replaced: focus its successor with the same key.
  if (focusKey && !main.contains(document.activeElement)) {
    const again = [...main.querySelectorAll("a, button, input, select")].find(
      (el) => keyOf(el) + el.textContent === focusKey,
    );
    again?.focus();
  }
}

let generation = 0;
let timer;
// Keep the operator's place: no refresh while messages are ticked, a filter is focused or an action runs.
const holding = () =>
  acting > 0 ||
  main.querySelector("input[name=pick]:checked, form.filters input:focus, form.filters select:focus") !==
    null;

/**
 * Reads the current view and shows it. `why`: "navigate" (the hash changed: always wins, even over a
 * refresh in flight), "action" (after an operator action), "refresh" (the poll), "load".
 * Only the newest call's answer is shown; an older one still in flight is dropped when it lands.
 */
async function render(why = "refresh") {
  clearTimeout(timer);
  if (why === "refresh" && holding()) {
    timer = setTimeout(() => void render(), POLL_MS);
    return;
  }
  const mine = ++generation;
  let view;
  try {
    view = await route();
  } catch (e) {
    if (mine !== generation) return;
    if (e.signIn) return showSignIn();
    view = errorView(e);
  }
  if (mine !== generation) return;
  if (why === "navigate") say(""); // a new page: what the last action said is done with
  show(view, why === "navigate");
  if (!whoLine.textContent) void whoAmI();
  // A view the API refused (data-still) stays as it is until the address changes.
  if (!view.hasAttribute("data-still")) timer = setTimeout(() => void render(), POLL_MS);
}

let signIns = 0; // a sign-out in the meantime makes an answer about the old session stale
async function whoAmI() {
  const session = signIns;
  const who = await api("/api/whoami").catch(() => undefined);
  if (session !== signIns) return;
  whoLine.textContent = who ? `${who.label} · ${who.env}` : "";
  signOutButton.hidden = !who || who.open === true;
}

function showSignIn() {
  generation++; // drops whatever is in flight
  signIns++;
  clearTimeout(timer);
  whoLine.textContent = "";
  signOutButton.hidden = true;
  putSignIn();
}

/**
 * Shows the sign-in form with the token field focused: at load, after a refused token and after
 * signing out, a keyboard or screen-reader user is where they type next, not at the top of the page.
 */
function putSignIn(error) {
  main.replaceChildren(signInView(error));
  document.getElementById("token").focus();
}

signOutButton.onclick = async () => {
  try {
    await post("/api/logout");
  } catch (e) {
    return say(`Sign-out failed: ${describe(e)}`, true);
  }
  showSignIn();
  say("Signed out.");
  document.getElementById("token")?.focus();
};

window.addEventListener("hashchange", () => void render("navigate"));
void render("load");
