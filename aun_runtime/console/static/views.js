// The main views (a conversation, an agent's card, the failures) and the side list.
import { $, h, clock, snip } from "./dom.js";
import { S, MAX_ALERT_TEXT, convTitle, isThreadRoot, rootOf } from "./model.js";
import { drawMessage, thoughtLine } from "./message.js";


function nearBottom() {
  const view = $("view");
  return view.scrollHeight - view.scrollTop - view.clientHeight < 80;
}

function scrollToBottom() {
  const view = $("view");
  view.scrollTop = view.scrollHeight;
}

function placeThread(root, timeline) {
  const el = drawMessage(root, 0);
  el.dataset.order = root.order;
  el.classList.add("thread");
  const old = S.threadEls.get(root.id);
  S.threadEls.set(root.id, el);
  if (old) { old.replaceWith(el); return; }
  let before = null;
  for (let node = timeline.lastElementChild; node; node = node.previousElementSibling) {
    if (Number(node.dataset.order) > root.order) before = node; else break;
  }
  timeline.insertBefore(el, before);
}

function drawConversation(c) {
  S.threadEls = new Map();
  const members = [...c.members].sort();
  $("view-header").replaceChildren(...[
    h("h2", { text: convTitle(c) }),
    c.kind === "group" && c.mode ? h("span", { class: "chip", title: "the group's dispatch mode", text: `${c.mode} mode` }) : null,
    h("span", { class: "members", text: members.join(", ") })].filter(Boolean));
  const timeline = h("div", { class: "timeline", id: "timeline" });
  $("view").replaceChildren(timeline);
  for (const id of c.ids) {
    const e = S.msgs.get(id);
    if (isThreadRoot(e)) placeThread(e, timeline);
  }
  c.unread = 0;
  scrollToBottom();
}

function updateConversation(c, touched) {
  const timeline = $("timeline");
  if (!timeline) return drawConversation(c);
  const stick = nearBottom();
  const roots = new Map();
  for (const id of touched) {
    const e = S.msgs.get(id);
    if (!e || e.conv !== c.key) continue;
    if (!isThreadRoot(e) && S.threadEls.has(id)) { // it found its parent: it now lives there
      S.threadEls.get(id).remove();
      S.threadEls.delete(id);
    }
    const root = rootOf(e);
    roots.set(root.id, root);
  }
  for (const root of roots.values()) placeThread(root, timeline);
  c.unread = 0;
  if (stick) scrollToBottom();
}

// One line for what an agent is busy with (see GET api/busy), or that it is idle.
export function busyText(b) {
  if (!b) return "idle";
  const s = (x) => `${Math.round(x)} s`;
  const turn = b.turn_seconds === null ? "no turn in flight"
    : b.waiting_for ? `waiting for ${b.waiting_for} ${s(b.waiting_seconds)} (turn ${s(b.turn_seconds)}, try ${b.attempt})`
    : `working (turn ${s(b.turn_seconds)}, try ${b.attempt})`;
  const oldest = b.oldest_seconds === null ? "" : `, oldest ${s(b.oldest_seconds)}`;
  return `${turn} · ${b.mailbox} in mailbox${oldest}`;
}

function drawAgent(aid) {
  const a = S.agents.get(aid) || { aid, role: "unknown", mode: "?", description: "", card: null };
  let sent = 0, received = 0, filtered = 0;
  const convs = new Set();
  for (const e of S.msgs.values()) {
    if (e.m.from_aid === aid && e.sent) { sent += 1; convs.add(e.conv); }
    if (e.receivers.includes(aid)) { received += 1; convs.add(e.conv); }
    if (e.filtered.some((f) => f.owner === aid)) { filtered += 1; convs.add(e.conv); }
  }
  $("view-header").replaceChildren(h("h2", { text: aid }), h("span", { class: "chip", text: a.mode }));
  const card = h("div", { class: "card", "data-aid": aid },
    h("dl", {},
      h("dt", { text: "AID" }), h("dd", { text: a.aid }),
      h("dt", { text: "mode" }), h("dd", { text: a.mode }),
      h("dt", { text: "role" }), h("dd", { text: a.role === "inbox" ? "application inbox" : a.role }),
      h("dt", { text: "description" }), h("dd", { text: a.description || "—" }),
      h("dt", { text: "traffic" }), h("dd", { text: `${sent} sent · ${received} received · ${filtered} filtered (archived)` }),
      h("dt", { text: "now" }), h("dd", { class: "busy", text: busyText(S.busy.get(aid)) })),
    agentMd(a),
    h("h3", { text: "Conversations" }),
    h("ul", { class: "links" }, [...convs].map((key) => h("li", {}, h("a", { href: `#c=${encodeURIComponent(key)}`, text: convTitle(S.convs.get(key)) })))),
    agentFailures(aid),
    agentThoughts(aid));
  $("view").replaceChildren(card);
}

// The agent's agent.md: its fields, then its Markdown body as text (never as HTML).
function agentMd(a) {
  const f = a.card_fields;
  if (f) {
    return h("section", { class: "agent-md" },
      h("h3", { text: `agent.md: ${f.name}` }),
      h("dl", {},
        h("dt", { text: "type" }), h("dd", { text: f.type }),
        h("dt", { text: "version" }), h("dd", { text: f.version }),
        f.tags.length ? [h("dt", { text: "tags" }), h("dd", {}, f.tags.map((t) => h("span", { class: "chip tag-chip", text: t })))] : null),
      f.body.trim() ? h("pre", { class: "agent-md-body", text: f.body.trim() }) : null);
  }
  if (a.card) {
    return h("section", { class: "agent-md" },
      h("p", { class: "error", text: a.card_error || "" }), h("pre", { class: "agent-md-body", text: a.card }));
  }
  return h("p", { class: "hint", text: "No agent.md card registered; this is the runtime's metadata." });
}

function agentFailures(aid) {
  const own = S.failures.filter((f) => f.owner === aid);
  if (!own.length) return null;
  return h("div", {}, h("h3", { text: "Failures" }), own.map(drawFailure));
}

function agentThoughts(aid) {
  const loose = S.looseThoughts.get(aid) || [];
  if (!loose.length) return null;
  return h("div", { class: "hideable" }, h("h3", { text: "Thoughts about no message" }), loose.map(thoughtLine));
}

const FAILURE_LOOK = {
  dead_letter: { cls: "dead-letter", label: "dead letter at " },
  loop_stop: { cls: "loop-stop", label: "loop guard stopped " },
  budget_stop: { cls: "budget-stop", label: "budget stop for " },
  model_anomaly: { cls: "model-anomaly", label: "model anomaly for " },
};

function drawFailure(f) {
  const e = f.messageId ? S.msgs.get(f.messageId) : null;
  const look = FAILURE_LOOK[f.kind] || FAILURE_LOOK.dead_letter;
  return h("div", { class: `alert ${look.cls}` },
    h("time", { text: clock(f.at) }), " ",
    look.label,
    h("b", { text: f.owner }), `: ${snip(f.reason, MAX_ALERT_TEXT)}`,
    e ? h("a", { class: "open", href: `#c=${encodeURIComponent(e.conv)}`, text: ` open ${convTitle(S.convs.get(e.conv))}` }) : null,
    redriveButton(f));
}

// A retryable dead letter, on a console that may act: a button that delivers it again (POST api/redrive).
function redriveButton(f) {
  if (f.kind !== "dead_letter" || !f.reason.startsWith("retryable: ") || S.info.read_only !== false) return null;
  if (S.redriven.has(f.id)) return h("span", { class: "redriven", text: ` ${S.redriven.get(f.id)}` });
  const button = h("button", { class: "redrive", type: "button", text: "retry" });
  button.addEventListener("click", async () => {
    button.disabled = true;
    const r = await fetch("api/redrive", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ record_id: f.id }) });
    if (r.ok) S.redriven.set(f.id, "redriven");
    button.replaceWith(h("span", { class: "redriven", text: r.ok ? " redriven" : " not redriven" }));
  });
  return button;
}

function drawFailures() {
  $("view-header").replaceChildren(h("h2", { text: "Failures" }),
    h("span", { class: "members", text: "dead letters, loop-guard stops and budget stops; silence is never one of them" }));
  $("view").replaceChildren(S.failures.length ? h("div", { class: "failures" }, S.failures.map(drawFailure))
    : h("p", { class: "empty", text: "No dead letters, no loop stops, no budget stops." }));
}

export function drawView(touched) {
  const v = S.view;
  if (!v) return;
  if (v.type === "conv") {
    const c = S.convs.get(v.key);
    if (!c) return;
    if (touched) updateConversation(c, touched); else drawConversation(c);
  } else if (v.type === "agent") drawAgent(v.aid);
  else if (v.type === "failures") drawFailures();
}

// ---- side list --------------------------------------------------------------------------------

function sideItem(href, active, name, meta, unread, extraClass) {
  return h("li", {}, h("a", { href, class: `item${active ? " active" : ""}${unread ? " unread" : ""}${extraClass ? " " + extraClass : ""}` },
    h("span", { class: "name", text: name }), h("span", { class: "meta", text: meta }),
    unread ? h("span", { class: "badge", text: unread }) : null));
}

export function drawSide() {
  const v = S.view || {};
  const groups = [], directs = [];
  for (const c of [...S.convs.values()].sort((a, b) => b.last - a.last)) {
    const active = v.type === "conv" && v.key === c.key;
    const meta = c.kind === "group" ? `${c.mode || ""}${c.mode ? " · " : ""}${c.members.size} members` : `${c.ids.length}`;
    (c.kind === "group" ? groups : directs).push(sideItem(`#c=${encodeURIComponent(c.key)}`, active, convTitle(c), meta, c.unread));
  }
  const none = () => h("li", { class: "none", text: "none yet" });
  $("groups").replaceChildren(...(groups.length ? groups : [none()]));
  $("directs").replaceChildren(...(directs.length ? directs : [none()]));
  const agents = [...S.agents.values()].map((a) => sideItem(`#a=${encodeURIComponent(a.aid)}`, v.type === "agent" && v.aid === a.aid,
    a.aid, a.role === "inbox" ? "inbox" : S.busy.has(a.aid) ? (S.busy.get(a.aid).waiting_for ? `waiting: ${S.busy.get(a.aid).waiting_for}` : "busy") : a.mode,
    0, `role-${a.role}`));
  $("agents").replaceChildren(...(agents.length ? agents : [none()]));
  const count = (kind) => S.failures.filter((f) => f.kind === kind).length;
  const plural = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
  const dead = count("dead_letter"), loops = count("loop_stop"), budgets = count("budget_stop");
  const anomalies = count("model_anomaly");
  const link = $("failures-link");
  // Budget stops are named only when there are some, so the usual line stays short.
  link.textContent = S.failures.length
    ? `${plural(dead, "dead letter")} · ${plural(loops, "loop stop")}${budgets ? ` · ${plural(budgets, "budget stop")}` : ""}${anomalies ? ` · ${anomalies} model ${anomalies === 1 ? "anomaly" : "anomalies"}` : ""}`
    : "none";
  link.className = `item${S.failures.length ? " has-failures" : ""}${v.type === "failures" ? " active" : ""}`;
}
