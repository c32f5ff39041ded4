// The aun-runtime console page. Plain JavaScript, no build step.
//
// It follows the archive through one Server-Sent Events stream ("records" events, each record
// once, in archive order; the browser resumes with Last-Event-ID after a drop) and draws it the way
// AUN asks a client to: silence is "delivered", never an error; replies sit under what they answer;
// a message an agent sent on its own is "proactive"; what a channel filtered and what an agent only
// thought are muted, behind a toggle; dead letters and loop-guard stops stand out.
"use strict";

(() => {
  // ---- state ------------------------------------------------------------------------------------

  const S = {
    lastId: 0,
    info: {},
    agents: new Map(), // aid -> {aid, role, mode, description, card}
    msgs: new Map(), // message_id -> entry (see entryFor)
    children: new Map(), // message_id -> [message_id] answering it, in archive order
    convs: new Map(), // key -> conversation
    toolCalls: new Map(), // "from|call_id" -> message_id of the tool_call
    toolResults: new Map(), // "from|call_id" -> message_id of a tool_result seen before its call
    pendingThoughts: new Map(), // message_id -> [thought] seen before the message
    looseThoughts: new Map(), // aid -> [thought] about no message
    failures: [], // {id, kind, owner, reason, messageId, at}
    caughtUpAt: 0, // the archive's head when the page connected: records up to it are backlog
    view: null, // {type: "conv", key} | {type: "agent", aid} | {type: "failures"}
    threadEls: new Map(), // root message_id -> element, for the conversation on screen
    replyTo: null,
  };
  const MAX_ALERT_TEXT = 400;

  // ---- small helpers ----------------------------------------------------------------------------

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  const $ = (id) => document.getElementById(id);

  function clock(ms) {
    if (!ms) return "";
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, "0");
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
  }

  function snip(text, n = 80) {
    const flat = String(text ?? "").replace(/\s+/g, " ").trim();
    return flat.length <= n ? flat : flat.slice(0, n - 1) + "…";
  }

  function convKey(m) {
    return m.group_id ? `g:${m.group_id}` : `d:${[m.from_aid, m.to].sort().join("|")}`;
  }

  function convTitle(c) {
    return c.kind === "group" ? `#${c.gid}` : c.pair.join(" ↔ ");
  }

  function role(aid) {
    const agent = S.agents.get(aid);
    return agent ? agent.role : "unknown";
  }

  // ---- the model: records in, entries out --------------------------------------------------------

  function conversation(m, order) {
    const key = convKey(m);
    let c = S.convs.get(key);
    if (!c) {
      c = m.group_id
        ? { key, kind: "group", gid: m.group_id, members: new Set() }
        : { key, kind: "direct", pair: [m.from_aid, m.to].sort(), members: new Set([m.from_aid, m.to]) };
      Object.assign(c, { ids: [], order, last: order, unread: 0, mode: null });
      S.convs.set(key, c);
    }
    if (m.group_id) {
      c.members.add(m.from_aid);
      if (m.dispatch_mode) c.mode = m.dispatch_mode;
    }
    return c;
  }

  function entryFor(m, recordId, touched) {
    let e = S.msgs.get(m.message_id);
    if (e) return e;
    e = {
      id: m.message_id, m, order: recordId, conv: convKey(m), sent: false,
      receivers: [], filtered: [], dead: [], loopStop: null, thoughts: [], result: null, call: null,
    };
    S.msgs.set(e.id, e);
    const c = conversation(m, recordId);
    c.ids.push(e.id);
    const onScreen = S.view && S.view.type === "conv" && S.view.key === c.key;
    if (recordId > S.caughtUpAt && !onScreen) c.unread += 1; // the backlog is not "new"
    if (m.in_reply_to) {
      if (!S.children.has(m.in_reply_to)) S.children.set(m.in_reply_to, []);
      S.children.get(m.in_reply_to).push(e.id);
      touched.add(m.in_reply_to);
    }
    // Replies that arrived before this message now have their parent.
    for (const child of S.children.get(e.id) || []) touched.add(child);
    const p = m.payload || {};
    const toolKey = `${m.from_aid}|${p.call_id}`;
    if (p.type === "tool_call") {
      S.toolCalls.set(toolKey, e.id);
      const early = S.toolResults.get(toolKey);
      if (early) linkTool(e, S.msgs.get(early), touched);
    } else if (p.type === "tool_result") {
      const callId = S.toolCalls.get(toolKey);
      if (callId) linkTool(S.msgs.get(callId), e, touched);
      else S.toolResults.set(toolKey, e.id);
    }
    for (const t of S.pendingThoughts.get(e.id) || []) e.thoughts.push(t);
    S.pendingThoughts.delete(e.id);
    return e;
  }

  function linkTool(call, result, touched) {
    call.result = result;
    result.call = call;
    touched.add(call.id);
    touched.add(result.id);
  }

  function ingest(records) {
    const touched = new Set();
    for (const r of records) {
      if (r.id <= S.lastId) continue; // never twice, whatever the network did
      S.lastId = r.id;
      const m = r.message;
      if (m) {
        const e = entryFor(m, r.id, touched);
        touched.add(e.id);
        const c = S.convs.get(e.conv);
        c.last = r.id;
        if (r.kind === "sent") e.sent = true;
        else if (r.kind === "received") {
          e.receivers.push(r.owner);
          if (c.kind === "group") c.members.add(r.owner);
        } else if (r.kind === "filtered") {
          e.filtered.push({ owner: r.owner, reason: r.reason });
          c.members.add(r.owner);
        } else if (r.kind === "dead_letter") {
          e.dead.push({ owner: r.owner, reason: r.reason });
          failure(r, e.id);
        } else if (r.kind === "loop_stop") {
          e.loopStop = { owner: r.owner, reason: r.reason };
          failure(r, e.id);
        }
      } else if (r.kind === "thought") {
        const t = { owner: r.owner, text: r.text || "", at: r.recorded_at, id: r.id };
        if (r.about && S.msgs.has(r.about)) {
          S.msgs.get(r.about).thoughts.push(t);
          touched.add(r.about);
        } else if (r.about) {
          if (!S.pendingThoughts.has(r.about)) S.pendingThoughts.set(r.about, []);
          S.pendingThoughts.get(r.about).push(t);
        } else {
          if (!S.looseThoughts.has(r.owner)) S.looseThoughts.set(r.owner, []);
          S.looseThoughts.get(r.owner).push(t);
        }
      } else if (r.kind === "dead_letter" || r.kind === "loop_stop") {
        failure(r, null);
      }
    }
    return touched;
  }

  function failure(r, messageId) {
    S.failures.push({ id: r.id, kind: r.kind, owner: r.owner, reason: r.reason || r.text || "", messageId, at: r.recorded_at });
  }

  // A message sits under the message it answers when that one is in the same conversation;
  // otherwise it starts a thread of its own (and says what it answers).
  function parentOf(e) {
    const parentId = e.m.in_reply_to;
    const parent = parentId ? S.msgs.get(parentId) : null;
    return parent && parent.conv === e.conv ? parent : null;
  }

  // A tool_result whose tool_call is known is drawn inside that call's note, not on its own.
  function drawnInsideCall(e) {
    return Boolean(e.call) && e.call.conv === e.conv;
  }

  function rootOf(e) {
    const seen = new Set();
    let cur = drawnInsideCall(e) ? e.call : e;
    while (!seen.has(cur.id)) {
      seen.add(cur.id);
      const parent = parentOf(cur);
      if (!parent) break;
      cur = parent;
    }
    return cur;
  }

  function isThreadRoot(e) {
    return !drawnInsideCall(e) && !parentOf(e);
  }

  function repliesOf(e) {
    return (S.children.get(e.id) || [])
      .map((id) => S.msgs.get(id))
      .filter((child) => child && child.conv === e.conv && !drawnInsideCall(child));
  }

  // What became of a message. There is no "unanswered": silence is a legal answer.
  function statusOf(e) {
    if (e.loopStop) return { cls: "stopped", label: "stopped by loop guard" };
    if (e.dead.length && !e.receivers.length) return { cls: "dead", label: "dead letter" };
    if (e.receivers.length) return { cls: "delivered", label: "delivered" };
    if (e.filtered.length) return { cls: "filtered", label: "filtered · archived" };
    return { cls: "sent", label: "sent" };
  }

  function isProactive(m) {
    return !m.in_reply_to && !m.hops && role(m.from_aid) !== "inbox";
  }

  // ---- drawing one message ----------------------------------------------------------------------

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
    parts.forEach((part, i) => { if (i) line.append(h("span", { class: "sep", text: " · " })); line.append(part); });
    return line;
  }

  function thoughtLine(t) {
    const silent = /^\s*__SILENT__/.test(t.text);
    return h("div", { class: "thought hideable", title: "Internal: archived, never sent" },
      h("span", { class: "who", text: t.owner }),
      silent ? " decided to stay silent" : " thought (not sent)",
      silent ? null : h("span", { class: "text", text: `: ${t.text}` }));
  }

  function drawMessage(e, depth) {
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
    if (e.dead.length || e.loopStop) classes.push("failure");

    const tags = [];
    if (isTool) {
      // a note on the sender's own tool use starts nothing and answers nothing
    } else if (!m.in_reply_to && !m.hops && !e.loopStop) {
      tags.push(isProactive(m)
        ? h("span", { class: "tag proactive", title: "Sent on the agent's own initiative, answering nothing", text: "proactive" })
        : h("span", { class: "tag new", text: "new conversation" }));
    } else if (m.in_reply_to && !parentOf(e)) {
      const parent = S.msgs.get(m.in_reply_to);
      const where = parent ? ` in ${convTitle(S.convs.get(parent.conv))}` : "";
      const what = parent ? `“${snip(parent.m.payload && parent.m.payload.text, 40)}”` : m.in_reply_to.slice(0, 8);
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
      S.info.read_only !== false || e.loopStop ? null
        : h("button", { class: "reply-btn", type: "button", title: "Answer this as a local agent", onclick: () => startReply(e), text: "reply" }));

    const el = h("article", { class: classes.join(" "), "data-mid": e.id, "data-from": m.from_aid },
      head, payloadBody(e), fateLine(e));
    for (const d of e.dead) {
      el.append(h("div", { class: "alert dead-letter", text: `dead letter at ${d.owner}: ${snip(d.reason, MAX_ALERT_TEXT)}` }));
    }
    if (e.loopStop) {
      el.append(h("div", { class: "alert loop-stop", text: `loop guard stopped ${e.loopStop.owner}: ${snip(e.loopStop.reason, MAX_ALERT_TEXT)}` }));
    }
    for (const t of e.thoughts) el.append(thoughtLine(t));
    if (replies.length) {
      const box = h("div", { class: `replies${depth >= 4 ? " flat" : ""}`, "data-count": replies.length },
        h("div", { class: "replies-head", text: replies.length === 1 ? "1 reply" : `${replies.length} replies` }));
      for (const child of replies) box.append(drawMessage(child, depth + 1));
      el.append(box);
    }
    return el;
  }

  // ---- views ------------------------------------------------------------------------------------

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
        h("dt", { text: "traffic" }), h("dd", { text: `${sent} sent · ${received} received · ${filtered} filtered (archived)` })),
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

  function drawFailure(f) {
    const e = f.messageId ? S.msgs.get(f.messageId) : null;
    return h("div", { class: `alert ${f.kind === "loop_stop" ? "loop-stop" : "dead-letter"}` },
      h("time", { text: clock(f.at) }), " ",
      f.kind === "loop_stop" ? "loop guard stopped " : "dead letter at ",
      h("b", { text: f.owner }), `: ${snip(f.reason, MAX_ALERT_TEXT)}`,
      e ? h("a", { class: "open", href: `#c=${encodeURIComponent(e.conv)}`, text: ` open ${convTitle(S.convs.get(e.conv))}` }) : null);
  }

  function drawFailures() {
    $("view-header").replaceChildren(h("h2", { text: "Failures" }),
      h("span", { class: "members", text: "dead letters and loop-guard stops; silence is never one of them" }));
    $("view").replaceChildren(S.failures.length ? h("div", { class: "failures" }, S.failures.map(drawFailure))
      : h("p", { class: "empty", text: "No dead letters, no loop stops." }));
  }

  function drawView(touched) {
    const v = S.view;
    if (!v) return;
    if (v.type === "conv") {
      const c = S.convs.get(v.key);
      if (!c) return;
      if (touched) updateConversation(c, touched); else drawConversation(c);
    } else if (v.type === "agent") drawAgent(v.aid);
    else if (v.type === "failures") drawFailures();
    drawComposer();
  }

  // ---- side list --------------------------------------------------------------------------------

  function sideItem(href, active, name, meta, unread, extraClass) {
    return h("li", {}, h("a", { href, class: `item${active ? " active" : ""}${unread ? " unread" : ""}${extraClass ? " " + extraClass : ""}` },
      h("span", { class: "name", text: name }), h("span", { class: "meta", text: meta }),
      unread ? h("span", { class: "badge", text: unread }) : null));
  }

  function drawSide() {
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
      a.aid, a.role === "inbox" ? "inbox" : a.mode, 0, `role-${a.role}`));
    $("agents").replaceChildren(...(agents.length ? agents : [none()]));
    const dead = S.failures.filter((f) => f.kind === "dead_letter").length;
    const stops = S.failures.length - dead;
    const link = $("failures-link");
    link.textContent = S.failures.length ? `${dead} dead letter${dead === 1 ? "" : "s"} · ${stops} loop stop${stops === 1 ? "" : "s"}` : "none";
    link.className = `item${S.failures.length ? " has-failures" : ""}${v.type === "failures" ? " active" : ""}`;
  }

  // ---- navigation -------------------------------------------------------------------------------

  function viewFromHash() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("c=")) return { type: "conv", key: hash.slice(2) };
    if (hash.startsWith("a=")) return { type: "agent", aid: hash.slice(2) };
    if (hash === "failures") return { type: "failures" };
    return null;
  }

  function show(view) {
    S.view = view;
    S.replyTo = null;
    $("c-to").dataset.touched = "";
    drawView(null);
    drawSide();
  }

  window.addEventListener("hashchange", () => show(viewFromHash()));

  // ---- sending (only when the console allows it) ------------------------------------------------

  function localAids() {
    return [...S.agents.values()].map((a) => a.aid);
  }

  function drawComposer() {
    const form = $("composer");
    const v = S.view;
    form.hidden = Boolean(S.info.read_only) || !v || v.type !== "conv";
    if (form.hidden) return;
    const c = S.convs.get(v.key);
    const select = $("c-from");
    const current = select.value;
    const choices = c && c.kind === "direct" ? localAids().filter((aid) => c.pair.includes(aid)) : localAids();
    select.replaceChildren(...(choices.length ? choices : localAids()).map((aid) => h("option", { value: aid, text: aid })));
    if (current && [...select.options].some((o) => o.value === current)) select.value = current;
    if (S.replyTo) {
      $("reply-chip").hidden = false;
      $("reply-what").textContent = `${S.replyTo.m.from_aid}: “${snip(S.replyTo.m.payload && S.replyTo.m.payload.text, 50)}”`;
    } else $("reply-chip").hidden = true;
    prefillTarget();
  }

  // Unless the user typed a recipient, write to the conversation on screen: its group, or the
  // other side of the pair from the chosen sender.
  function prefillTarget() {
    const v = S.view;
    const c = v && v.type === "conv" ? S.convs.get(v.key) : null;
    const to = $("c-to");
    if (!to.dataset.touched && c) {
      const sender = $("c-from").value;
      to.value = c.kind === "group" ? `#${c.gid}` : c.pair.find((aid) => aid !== sender) || c.pair[0];
    }
    $("c-mentions-label").hidden = !to.value.startsWith("#");
  }

  function startReply(e) {
    S.replyTo = e;
    const m = e.m;
    const select = $("c-from");
    $("c-to").dataset.touched = "";
    drawComposer();
    if (!m.group_id && [...select.options].some((o) => o.value === m.to)) select.value = m.to;
    $("c-to").value = m.group_id ? `#${m.group_id}` : m.from_aid;
    $("c-mentions-label").hidden = !m.group_id;
    $("c-text").focus();
  }

  async function submit(event) {
    event.preventDefault();
    const to = $("c-to").value.trim();
    const body = { from: $("c-from").value, text: $("c-text").value };
    if (to.startsWith("#")) {
      body.group_id = to.slice(1);
      const mentions = $("c-mentions").value.split(",").map((s) => s.trim()).filter(Boolean);
      if (mentions.length) body.mentions = mentions;
    } else body.to = to;
    if (S.replyTo) body.in_reply_to = S.replyTo.id;
    $("c-error").textContent = "";
    const response = await fetch("api/send", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (response.ok) {
      $("c-text").value = "";
      S.replyTo = null;
      drawComposer();
      return;
    }
    const answer = await response.json().catch(() => ({}));
    $("c-error").textContent = (answer.error && answer.error.message) || `send failed (${response.status})`;
  }

  // ---- the live stream --------------------------------------------------------------------------

  function setConnection(state, detail) {
    const labels = { live: "live", waiting: "waiting for the archive", closed: "archive closed", lost: "reconnecting…", connecting: "connecting…" };
    const conn = $("conn");
    conn.className = `conn conn-${state}`;
    conn.textContent = labels[state] || state;
    conn.title = detail || "";
  }

  function onHello(info) {
    S.info = info;
    if (S.lastId === 0) S.caughtUpAt = info.head;
    document.body.classList.toggle("can-send", !info.read_only);
    $("source").textContent = info.source;
    $("access").textContent = info.read_only ? "read-only" : "sending enabled";
    $("access").className = `chip ${info.read_only ? "read-only" : "send-enabled"}`;
    const note = $("backlog-note");
    note.hidden = !(info.start > 0 && S.lastId === 0);
    note.textContent = `Showing the newest records (after #${info.start}); older ones are in the archive.`;
    if (S.lastId === 0 && info.start > 0) S.lastId = info.start;
  }

  function onRecords(records) {
    const touched = ingest(records);
    if (!S.view) {
        const latest = [...S.convs.values()].sort((a, b) => b.last - a.last)[0];
      const first = viewFromHash() || (latest ? { type: "conv", key: latest.key } : null);
      if (first) { show(first); return; }
    } else if (S.view.type === "conv") drawView(touched);
    else drawView(null);
    drawSide();
  }

  function connect() {
    const stream = new EventSource("api/events");
    stream.addEventListener("hello", (ev) => onHello(JSON.parse(ev.data)));
    stream.addEventListener("records", (ev) => onRecords(JSON.parse(ev.data)));
    stream.addEventListener("agents", (ev) => {
      S.agents = new Map(JSON.parse(ev.data).map((a) => [a.aid, a]));
      drawSide();
      if (S.view) drawView(null);
    });
    stream.addEventListener("status", (ev) => { const s = JSON.parse(ev.data); setConnection(s.state, s.detail); });
    stream.addEventListener("error", () => setConnection(stream.readyState === EventSource.CLOSED ? "closed" : "lost", ""));
    stream.addEventListener("open", () => setConnection("live", ""));
  }

  function init() {
    const toggle = $("show-muted");
    toggle.checked = localStorage.getItem("aun-console-show-muted") === "1";
    document.body.classList.toggle("show-muted", toggle.checked);
    toggle.addEventListener("change", () => {
      document.body.classList.toggle("show-muted", toggle.checked);
      localStorage.setItem("aun-console-show-muted", toggle.checked ? "1" : "0");
    });
    $("composer").addEventListener("submit", submit);
    $("c-from").addEventListener("change", prefillTarget);
    $("reply-cancel").addEventListener("click", () => { S.replyTo = null; drawComposer(); });
    $("c-to").addEventListener("input", () => { $("c-to").dataset.touched = "1"; $("c-mentions-label").hidden = !$("c-to").value.startsWith("#"); });
    S.view = viewFromHash();
    if (S.view) drawSide();
    connect();
  }

  init();
})();
