/* The okengine Console page: plain ES module, no build step, nothing fetched from elsewhere. */
/* global document, window, fetch, location, setTimeout, clearTimeout, URLSearchParams */

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const POLL_MS = 2000;
let timer;

/** Builds an element: h("a", { href: "#/" }, "text", child…). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat())
    if (c !== undefined && c !== null) el.append(c instanceof Node ? c : String(c));
  return el;
}
const Node = window.Node;

async function api(path, options = {}) {
  const res = await fetch(path, {
    ...options,
    credentials: "same-origin",
    headers: options.body
      ? { "content-type": "application/json", "x-oke-console": "1" }
      : { "x-oke-console": "1" },
  });
  const body = await res.json();
  const message = body.error ? `${body.error.code}: ${body.error.message}` : res.statusText;
  if (!res.ok) throw Object.assign(new Error(message), { body, signIn: res.status === 401 });
  return body;
}
const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body ?? {}) });

const time = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "—");
const age = (ms) =>
  ms === null || ms === undefined
    ? "—"
    : ms < 1000
      ? `${ms} ms`
      : ms < 60000
        ? `${Math.round(ms / 1000)} s`
        : `${Math.round(ms / 60000)} min`;
const link = (href, text, label) => h("a", { href, "aria-label": label }, text);
const runLink = (id) => link(`#/run/${encodeURIComponent(id)}`, id, `run ${id}`);
const enc = encodeURIComponent;

function table(headers, rows, caption) {
  return h(
    "table",
    {},
    caption ? h("caption", { class: "muted" }, caption) : null,
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((x) => h("th", { scope: "col" }, x)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "Nothing here.")),
    ),
  );
}
const bars = (xs) =>
  h(
    "span",
    { class: "bar", role: "img", "aria-label": `deliveries per minute: ${xs.join(", ")}` },
    xs.map((n) => h("span", { style: `height:${Math.min(18, 1 + n)}px` })),
  );

function confirmAction(text) {
  return window.confirm(text);
}

// Views. Each returns a node; the router re-renders it every POLL_MS (live updates, no reload).

async function overview() {
  const o = await api("/api/overview");
  return h(
    "div",
    {},
    h("h1", {}, "Overview"),
    h("h2", {}, "Signals"),
    table(
      ["Signal", "Delivery", "Pending", "In flight", "Dead", "Delivered", "Oldest pending", "Last 10 min"],
      o.signals.flatMap((s) => [
        h(
          "tr",
          {},
          h(
            "td",
            {},
            s.delivery === "once" ? link(`#/signal/${enc(s.name)}`, s.name, `signal ${s.name}`) : s.name,
          ),
          h("td", {}, s.schedule !== undefined ? "clock" : s.delivery),
          h("td", { class: "num" }, s.pending ?? "—"),
          h("td", { class: "num" }, s.inflight ?? "—"),
          h("td", { class: `num${s.dead ? " bad" : ""}` }, s.dead ?? "—"),
          h("td", { class: "num" }, s.delivered ?? "—"),
          h("td", {}, age(s.oldestPendingAgeMs)),
          h("td", {}, bars(s.throughput.delivered)),
        ),
        // A broadcast signal's per-flow copy queues, under it and labelled — never as signals.
        ...(s.copies ?? []).map((c) =>
          h(
            "tr",
            { class: "copies" },
            h("td", {}, `↳ copies for ${c.flow}`),
            h("td", {}, "copies"),
            h("td", { class: "num" }, c.pending),
            h("td", { class: "num" }, c.inflight),
            h("td", { class: "num" }, c.dead),
            h("td", { class: "num" }, c.delivered),
            h("td", {}, age(c.oldestPendingAgeMs)),
            h("td", {}, ""),
          ),
        ),
      ]),
    ),
    h("h2", {}, "Flows"),
    table(
      ["Flow", "Triggers", "Durable", "Runs"],
      o.flows.map((f) =>
        h(
          "tr",
          {},
          h("td", {}, f.durable ? link(`#/runs?flow=${enc(f.name)}`, f.name, `runs of ${f.name}`) : f.name),
          h("td", {}, f.triggers.join(", ")),
          h("td", {}, f.durable ? "yes" : "no"),
          h(
            "td",
            {},
            Object.entries(f.runs)
              .map(([k, v]) => `${k} ${v}`)
              .join(" · ") || "—",
          ),
        ),
      ),
    ),
    h("h2", {}, "Recent failures"),
    table(
      ["When", "What", "Failure"],
      [
        ...o.recentFailures.deadLetters.map((m) =>
          h(
            "tr",
            {},
            h("td", {}, time(m.updatedAt)),
            h(
              "td",
              {},
              "dead letter ",
              link(`#/message/${enc(m.id)}`, m.id, `message ${m.id}`),
              ` on ${m.signal}`,
            ),
            h("td", { class: "bad" }, m.failures.at(-1)?.message ?? ""),
          ),
        ),
        ...o.recentFailures.runs.map((r) =>
          h(
            "tr",
            {},
            h("td", {}, time(r.updatedAt)),
            h("td", {}, "run ", runLink(r.id), ` of ${r.flow}`),
            h("td", { class: "bad" }, r.error?.message ?? ""),
          ),
        ),
      ],
    ),
    h("p", { class: "muted" }, `${o.instances} instance(s) alive · env ${o.env}`),
  );
}

async function signalView(name, params) {
  const status = params.get("status") ?? "dead";
  const cursor = params.get("cursor");
  const [s, page] = await Promise.all([
    api(`/api/signals/${enc(name)}`),
    api(
      `/api/signals/${enc(name)}/messages?status=${status}&limit=50${cursor ? `&cursor=${enc(cursor)}` : ""}`,
    ),
  ]);
  const selected = () => [...main.querySelectorAll("input[name=pick]:checked")].map((i) => i.value);
  const act = async (verb, all) => {
    const ids = selected();
    if (!all && ids.length === 0) return say("Select messages first.");
    const target = all ? { all: true } : { ids };
    const dry = await post(`/api/signals/${enc(name)}/${verb}`, { ...target, dryRun: true });
    if (!confirmAction(`${verb === "replay" ? "Replay" : "Discard"} ${dry.count} dead letter(s) of ${name}?`))
      return;
    const done = await post(`/api/signals/${enc(name)}/${verb}`, target);
    say(
      `${verb === "replay" ? "Replayed" : "Discarded"} ${(done.replayed ?? done.discarded).length} message(s).`,
    );
    await render();
  };
  return h(
    "div",
    {},
    h("h1", {}, `Signal ${name}`),
    h(
      "p",
      {},
      `pending ${s.pending} · in flight ${s.inflight} · dead ${s.dead} · delivered ${s.delivered} · oldest pending ${age(s.oldestPendingAgeMs)} · `,
      bars(s.throughput.delivered),
    ),
    h(
      "nav",
      { "aria-label": "Message status" },
      ["dead", "pending", "inflight", "delivered"].map((st) =>
        h(
          "a",
          {
            href: `#/signal/${enc(name)}?status=${st}`,
            "aria-current": st === status ? "page" : null,
            style: "margin-right:1rem",
          },
          st === "dead" ? "Dead letters" : st,
        ),
      ),
    ),
    status === "dead"
      ? h(
          "p",
          {},
          h(
            "button",
            { class: "primary", type: "button", onclick: () => act("replay", false) },
            "Replay selected",
          ),
          " ",
          h("button", { type: "button", onclick: () => act("replay", true) }, "Replay all"),
          " ",
          h(
            "button",
            { class: "danger", type: "button", onclick: () => act("discard", false) },
            "Discard selected",
          ),
        )
      : null,
    table(
      [status === "dead" ? "Pick" : "", "Message", "Key", "Attempts", "Created", "Last failure"],
      page.items.map((m) =>
        h(
          "tr",
          {},
          h(
            "td",
            {},
            status === "dead"
              ? h("input", {
                  type: "checkbox",
                  name: "pick",
                  value: m.id,
                  "aria-label": `select message ${m.id}`,
                })
              : "",
          ),
          h("td", {}, link(`#/message/${enc(m.id)}`, m.id, `message ${m.id}`)),
          h("td", {}, m.key ?? "—"),
          h("td", { class: "num" }, m.attempts),
          h("td", {}, time(m.createdAt)),
          h("td", { class: m.failures.length ? "bad" : "" }, m.failures.at(-1)?.message ?? ""),
        ),
      ),
    ),
    page.next
      ? h(
          "p",
          {},
          link(`#/signal/${enc(name)}?status=${status}&cursor=${enc(page.next)}`, "Next page →", "next page"),
        )
      : null,
  );
}

async function messageView(id) {
  const m = await api(`/api/messages/${enc(id)}`);
  return h(
    "div",
    {},
    h("h1", {}, `Message ${m.id}`),
    h(
      "p",
      {},
      `signal `,
      link(`#/signal/${enc(m.signal)}`, m.signal, `signal ${m.signal}`),
      ` · status `,
      h("strong", { id: "message-status" }, m.status),
      ` · attempts ${m.attempts}`,
      m.parentRunId ? [" · emitted by ", runLink(m.parentRunId)] : "",
    ),
    m.status === "dead"
      ? h(
          "p",
          {},
          h(
            "button",
            {
              class: "primary",
              type: "button",
              onclick: async () => {
                if (!confirmAction(`Replay message ${m.id}?`)) return;
                const r = await post(`/api/signals/${enc(m.signal)}/replay`, { ids: [m.id] });
                say(`Replayed ${r.replayed.length} message(s).`);
                await render();
              },
            },
            "Replay this message",
          ),
        )
      : null,
    h("h2", {}, "Failure history"),
    table(
      ["Attempt", "When", "Code", "Message"],
      m.failures.map((f) =>
        h(
          "tr",
          {},
          h("td", { class: "num" }, f.attempt),
          h("td", {}, time(f.at)),
          h("td", {}, h("code", {}, f.code)),
          h("td", {}, f.message),
        ),
      ),
    ),
    h("h2", {}, "Payload"),
    h("pre", {}, JSON.stringify(m.payload, null, 2)),
  );
}

async function runsView(params) {
  const q = new URLSearchParams(params);
  q.set("limit", "50");
  const page = await api(`/api/runs?${q}`);
  const field = (name, label, el) => h("label", {}, label, el);
  const form = h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        const f = new URLSearchParams();
        for (const el of e.target.elements) if (el.name && el.value) f.set(el.name, el.value);
        location.hash = `#/runs?${f}`;
      },
    },
    field(
      "status",
      "Status",
      h(
        "select",
        { name: "status" },
        ["", "running", "sleeping", "compensating", "completed", "failed"].map((s) =>
          h("option", { value: s, selected: params.get("status") === s }, s || "any"),
        ),
      ),
    ),
    field("flow", "Flow", h("input", { name: "flow", value: params.get("flow") ?? "" })),
    field("label", "Sleep label", h("input", { name: "label", value: params.get("label") ?? "" })),
    field("since", "Since (ISO)", h("input", { name: "since", value: params.get("since") ?? "" })),
    h("button", { type: "submit" }, "Filter"),
  );
  return h(
    "div",
    {},
    h("h1", {}, "Runs"),
    form,
    table(
      ["Run", "Flow", "Status", "Sleeping on", "Recoveries", "Created", "Updated"],
      page.items.map((r) =>
        h(
          "tr",
          {},
          h("td", {}, runLink(r.id)),
          h("td", {}, r.flow),
          h("td", { class: r.status === "failed" ? "bad" : "" }, r.status),
          h("td", {}, r.sleepingOn ?? ""),
          h("td", { class: r.recoveries > 0 ? "bad" : "" }, String(r.recoveries ?? 0)),
          h("td", {}, time(r.createdAt)),
          h("td", {}, time(r.updatedAt)),
        ),
      ),
    ),
    page.next
      ? h(
          "p",
          {},
          link(
            `#/runs?${new URLSearchParams({ ...Object.fromEntries(params), cursor: page.next })}`,
            "Next page →",
            "next page",
          ),
        )
      : null,
  );
}

async function runView(id) {
  const d = await api(`/api/runs/${enc(id)}`);
  const r = d.run;
  const item = (e) =>
    h(
      "li",
      {},
      h("strong", {}, e.kind),
      ` ${e.label ?? e.name} `,
      h("span", { class: "muted" }, `at ${time(e.at)} (+${e.tookMs} ms)`),
      e.preview ? [" → ", h("code", {}, e.preview)] : null,
      e.error ? h("span", { class: "bad" }, ` ${e.error.code}: ${e.error.message}`) : null,
      e.wakeAt ? ` · wakes ${time(e.wakeAt)} (${e.duration})` : null,
      e.messageId
        ? [
            " · message ",
            link(`#/message/${enc(e.messageId)}`, e.messageId, `message ${e.messageId}`),
            ` (${e.messageStatus ?? "pruned"})`,
          ]
        : null,
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
      d.sleepingOn ? ` on "${d.sleepingOn}" until ${time(r.wakeAt)}` : "",
      ` · created ${time(r.createdAt)}`,
      // Takeovers after its holder died or hung past its lease (durable.maxRecoveries bounds them).
      ` · recoveries ${r.recoveries ?? 0}`,
    ),
    r.status === "sleeping"
      ? h(
          "p",
          {},
          h(
            "button",
            {
              class: "primary",
              type: "button",
              onclick: async () => {
                if (!confirmAction(`Wake run ${r.id} now?`)) return;
                const w = await post(`/api/runs/${enc(r.id)}/wake`);
                say(`Woken (${w.outcome}).`);
                await render();
              },
            },
            "Wake now",
          ),
        )
      : null,
    r.error ? h("p", { class: "bad" }, `${r.error.code}: ${r.error.message}`) : null,
    h("h2", {}, "Trace chain"),
    h(
      "p",
      {},
      d.ancestors.length
        ? ["Parent: ", d.ancestors.map((a, i) => [i ? " ← " : "", runLink(a.id), ` (${a.flow})`])]
        : "No parent.",
      " ",
      d.children.length
        ? [
            "Children: ",
            d.children.map((c, i) => [i ? ", " : "", runLink(c.id), ` (${c.flow}, ${c.status})`]),
          ]
        : "No children.",
    ),
    h("h2", {}, "Timeline"),
    h("ol", { class: "timeline" }, d.timeline.map(item)),
    h("h2", {}, "Input"),
    h("pre", {}, JSON.stringify(r.input, null, 2)),
    r.output !== undefined ? [h("h2", {}, "Output"), h("pre", {}, JSON.stringify(r.output, null, 2))] : null,
  );
}

async function schedulesView() {
  const { schedules } = await api("/api/schedules");
  const act = (name, action) => async () => {
    if (!confirmAction(`${action} schedule ${name}?`)) return;
    await post(`/api/schedules/${enc(name)}/${action}`);
    say(`${action}: ${name}`);
    await render();
  };
  return h(
    "div",
    {},
    h("h1", {}, "Schedules"),
    table(
      ["Schedule", "Flow", "Spec", "Paused", "Actions"],
      schedules.map((s) =>
        h(
          "tr",
          {},
          h("td", {}, s.name),
          h("td", {}, s.flow),
          h(
            "td",
            {},
            h("code", {}, s.cron ?? `every ${s.every}`),
            ` ${s.timezone}`,
            s.overridden ? " (edited)" : "",
          ),
          h("td", {}, s.paused ? "paused" : "no"),
          h(
            "td",
            {},
            h(
              "button",
              { type: "button", onclick: act(s.name, s.paused ? "resume" : "pause") },
              s.paused ? `Resume ${s.name}` : `Pause ${s.name}`,
            ),
            " ",
            h("button", { type: "button", onclick: act(s.name, "trigger") }, `Trigger ${s.name} now`),
          ),
        ),
      ),
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
      ["Instance", "Version", "Env", "Started", "Last heartbeat", "Runs", "Console"],
      instances.map((i) =>
        h(
          "tr",
          {},
          h("td", {}, i.id, i.id === self ? " (this one)" : ""),
          h("td", {}, `${i.version} (okengine ${i.okengineVersion})`),
          h("td", {}, i.env),
          h("td", {}, time(i.startedAt)),
          h("td", {}, time(i.seenAt)),
          h("td", {}, `${i.flows.length} flows; consumes ${i.signals.join(", ") || "—"}`),
          h("td", {}, i.console ?? "—"),
        ),
      ),
    ),
  );
}

async function auditView() {
  const page = await api("/api/audit?limit=100");
  return h(
    "div",
    {},
    h("h1", {}, "Audit log"),
    table(
      ["When", "Who", "Action", "Target", "Detail"],
      page.items.map((a) =>
        h(
          "tr",
          {},
          h("td", {}, time(a.at)),
          h("td", {}, a.actor),
          h("td", {}, a.action),
          h("td", {}, a.target),
          h("td", {}, h("code", {}, JSON.stringify(a.detail))),
        ),
      ),
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
          await render();
        } catch (err) {
          main.replaceChildren(signInView(err.message));
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

function say(text) {
  statusLine.textContent = text;
}

async function route() {
  const [path, qs] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(qs ?? "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case undefined:
      return overview();
    case "signal":
      return signalView(parts[1], params);
    case "message":
      return messageView(parts[1]);
    case "runs":
      return runsView(params);
    case "run":
      return runView(parts[1]);
    case "schedules":
      return schedulesView();
    case "instances":
      return instancesView();
    case "audit":
      return auditView();
    default:
      return h("p", {}, "No such view.");
  }
}

let rendering = false;
async function render(focus = false) {
  clearTimeout(timer);
  if (rendering) return;
  rendering = true;
  try {
    const view = await route();
    // Keep the operator's place: don't re-render under an open form or checked boxes.
    const busy = main.querySelector(
      "input[name=pick]:checked, form.filters input:focus, form.filters select:focus",
    );
    if (!busy || focus) main.replaceChildren(view);
    if (focus) main.focus();
    const who = await api("/api/whoami").catch(() => undefined);
    document.getElementById("who").textContent = who ? `${who.label} · ${who.env}` : "";
    timer = setTimeout(() => void render(), POLL_MS);
  } catch (e) {
    if (e.signIn) main.replaceChildren(signInView());
    else {
      say(e.message);
      timer = setTimeout(() => void render(), POLL_MS);
    }
  } finally {
    rendering = false;
  }
}

window.addEventListener("hashchange", () => void render(true));
void render();
