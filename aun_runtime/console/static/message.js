// Drawing one message with everything that became of it, and its replies under it.
import { h, clock, snip } from "./dom.js";
import { S, MAX_ALERT_TEXT, answeredId, convTitle, isProactive, parentOf, repliesOf, replyCount, statusOf, summaryOf } from "./model.js";

function mentionChips(m) {
  const mentions = (m.payload && m.payload.mentions) || [];
  return mentions.map((x) => h("span", { class: "mention", text: "@" + (x.aid || x.scope || "?") }));
}

function details(summary, value) {
  return h("details", { class: "data" }, h("summary", { text: summary }), h("pre", { text: JSON.stringify(value, null, 2) }));
}

function payloadBody(e) {
  const p = e.m.payload || {};
  if (p.type === "text") return h("div", { class: "text", text: p.text });
  if (p.type === "json") {
    return h("div", { class: "json" },
      h("span", { class: "kind", text: p.kind }), " ",
      p.fallback_text ? h("span", { class: "text", text: p.fallback_text }) : null,
      details("data", p.data));
  }
  if (p.type === "tool_call") return toolNote(e);
  if (p.type === "tool_result") return toolResultLine(e, p);
  return h("div", { class: "unknown" }, h("span", { class: "kind", text: `<${p.type}>` }), " ", details("payload", p));
}

function toolNote(e) {
  const p = e.m.payload;
  const args = JSON.stringify(p.arguments || {});
  const result = e.result ? e.result.m.payload : null;
  return h("div", { class: "tool-note", title: "A note on the sender's own tool use. Receiving it runs nothing and obliges nothing." },
    h("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }), " ",
    h("span", { class: "tool-who", text: e.m.from_aid }), " used its tool ",
    h("code", { class: "tool-name", text: p.name }),
    h("code", { class: "tool-args", text: `(${snip(args, 120)})` }),
    result ? toolResultLine(e.result, result) : h("span", { class: "tool-pending", text: " … running" }));
}

function toolResultLine(e, p) {
  const ok = p.ok;
  const value = ok ? p.result : p.error;
  return h("span", { class: `tool-result ${ok ? "ok" : "failed"}` },
    ok ? " → ok: " : " → failed: ",
    h("code", { text: snip(typeof value === "string" ? value : JSON.stringify(value), 160) }),
    e.call ? null : h("span", { class: "hint", text: ` (call ${p.call_id})` }));
}

// Answers sent in another conversation (a reply to a group message sent directly, a workflow
// passing work on): counted here, with a way to follow them.
function elsewhereLine(e) {
  const counts = new Map();
  for (const id of S.children.get(e.id) || []) {
    const child = S.msgs.get(id);
    if (child && child.conv !== e.conv) counts.set(child.conv, (counts.get(child.conv) || 0) + 1);
  }
  if (!counts.size) return null;
  const links = [...counts].map(([key, n]) =>
    h("a", { href: `#c=${encodeURIComponent(key)}`, text: `${convTitle(S.convs.get(key))}${n > 1 ? ` (${n})` : ""}` }));
  return h("div", { class: "elsewhere" }, "answered in ", links.flatMap((link, i) => (i ? [", ", link] : [link])));
}

function fateLine(e) {
  const parts = [];
  if (e.receivers.length) parts.push(h("span", { class: "fate-delivered", text: `delivered to ${e.receivers.join(", ")}` }));
  const byReason = new Map();
  for (const f of e.filtered) {
    const reason = f.reason || "filtered";
    if (!byReason.has(reason)) byReason.set(reason, []);
    byReason.get(reason).push(f.owner);
  }
  for (const [reason, owners] of byReason) {
    parts.push(h("span", { class: "fate-filtered hideable", title: "Kept by each agent's channel, in the archive; never shown to its model" },
      `filtered for ${owners.join(", ")} (${reason}; archived)`));
  }
  if (!parts.length) return null;
  const line = h("div", { class: "fate" });
  // A separator hides with the part after it: no stray " · " at the end when the toggle is off.
  parts.forEach((part, i) => {
    if (i) line.append(h("span", { class: `sep${part.classList.contains("hideable") ? " hideable" : ""}`, text: " · " }));
    line.append(part);
  });
  return line;
}

export function thoughtLine(t) {
  const silent = /^\s*__SILENT__/.test(t.text);
  return h("div", { class: "thought hideable", title: "Internal: archived, never sent" },
    h("span", { class: "who", text: t.owner }),
    silent ? " decided to stay silent" : " thought (not sent)",
    silent ? null : h("span", { class: "text", text: `: ${t.text}` }));
}

function replyLabel(count) {
  return count === 0 ? "no reply" : count === 1 ? "1 reply" : `${count} replies`;
}

export function drawMessage(e, depth) {
  const m = e.m;
  const st = statusOf(e);
  const replies = repliesOf(e);
  const wholeFiltered = st.cls === "filtered";
  const isTool = m.payload && (m.payload.type === "tool_call" || m.payload.type === "tool_result");
  const classes = ["msg", `status-${st.cls}`];
  if (isTool) classes.push("tool");
  if (wholeFiltered) classes.push("muted");
  // A message nobody was shown is hidden until the toggle is on, unless someone answered it anyway.
  if (wholeFiltered && !replies.length) classes.push("hideable");
  if (e.dead.length || e.loopStop || e.budgetStops.length) classes.push("failure");

  const tags = [];
  if (isTool) {
    // a note on the sender's own tool use starts nothing and answers nothing
  } else if (!m.in_reply_to && !m.hops && !e.loopStop && !e.budgetRefused) {
    tags.push(isProactive(m)
      ? h("span", { class: "tag proactive", title: "Sent on the agent's own initiative, answering nothing", text: "proactive" })
      : h("span", { class: "tag new", text: "new conversation" }));
  } else if (answeredId(m) && !parentOf(e)) {
    const parent = S.msgs.get(answeredId(m));
    const where = parent ? ` in ${convTitle(S.convs.get(parent.conv))}` : "";
    const what = parent ? `“${snip(summaryOf(parent.m), 40)}”` : answeredId(m).slice(0, 8);
    tags.push(h("a", { class: "tag re", href: parent ? `#c=${encodeURIComponent(parent.conv)}` : null, text: `re ${what}${where}` }));
  }
  const target = m.group_id ? `#${m.group_id}` : m.to;
  const head = h("header", {},
    h("span", { class: "from", text: m.from_aid }),
    h("span", { class: "arrow", text: " → " }),
    h("span", { class: "to", text: target }),
    " ", tags, " ", mentionChips(m),
    h("span", { class: "spacer" }),
    h("time", { text: clock(m.created_at), title: new Date(m.created_at).toISOString() }),
    h("span", { class: `status status-${st.cls}`, "data-status": st.cls, text: st.label }),
    S.info.read_only !== false || e.loopStop || e.budgetRefused ? null
      : h("button", { class: "reply-btn", type: "button", title: "Answer this as a local agent", onclick: (ev) => ev.target.dispatchEvent(new CustomEvent("aun-reply", { bubbles: true, detail: e.id })), text: "reply" }));

  const el = h("article", { class: classes.join(" "), "data-mid": e.id, "data-from": m.from_aid },
    head, payloadBody(e), fateLine(e));
  for (const d of e.dead) {
    el.append(h("div", { class: "alert dead-letter", text: `dead letter at ${d.owner}: ${snip(d.reason, MAX_ALERT_TEXT)}` }));
  }
  if (e.loopStop) {
    el.append(h("div", { class: "alert loop-stop", text: `loop guard stopped ${e.loopStop.owner}: ${snip(e.loopStop.reason, MAX_ALERT_TEXT)}` }));
  }
  for (const b of e.budgetStops) {
    el.append(h("div", { class: "alert budget-stop", text: `budget stop for ${b.owner}: ${snip(b.reason, MAX_ALERT_TEXT)}` }));
  }
  for (const t of e.thoughts) el.append(thoughtLine(t));
  const elsewhere = elsewhereLine(e);
  if (elsewhere) el.append(elsewhere);
  if (replies.length) {
    const drawn = replies.map((child) => drawMessage(child, depth + 1));
    // Replies the toggle hides, every one of them: their header hides with them.
    const allHideable = drawn.every((child) => child.classList.contains("hideable"));
    const box = h("div", { class: `replies${depth >= 4 ? " flat" : ""}${allHideable ? " hideable" : ""}`, "data-count": replies.length },
      h("div", { class: "replies-head", text: replyLabel(replyCount(e)) }));
    box.append(...drawn);
    el.append(box);
  }
  return el;
}
