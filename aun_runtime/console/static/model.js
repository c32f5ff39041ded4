// The console's model: archive records in, messages, conversations and failures out.
//
// Each record arrives once, in archive order. A message is one entry whatever the number of records
// about it (sent, received or filtered by each member, dead-lettered, stopped by the loop guard or a
// budget); replies are linked to what they answer, tool results to their calls, thoughts to the
// message they were about.

// The page's whole state.
export const S = {
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
  busy: new Map(), // aid -> what GET api/busy says of it (a turn in flight, its mailbox)
  redriven: new Map(), // dead letter id -> "redriven" | "dropped" (such a record names "dead letter #<id>")
  caughtUpAt: 0, // the archive's head when the page connected: records up to it are backlog
  view: null, // {type: "conv", key} | {type: "agent", aid} | {type: "failures"}
  threadEls: new Map(), // root message_id -> element, for the conversation on screen
  replyTo: null,
};
export const MAX_ALERT_TEXT = 400;

export function convKey(m) {
  return m.group_id ? `g:${m.group_id}` : `d:${[m.from_aid, m.to].sort().join("|")}`;
}

export function convTitle(c) {
  return c.kind === "group" ? `#${c.gid}` : c.pair.join(" ↔ ");
}

export function role(aid) {
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
    receivers: [], filtered: [], dead: [], loopStop: null, budgetStops: [], budgetRefused: false,
    thoughts: [], result: null, call: null,
  };
  S.msgs.set(e.id, e);
  const c = conversation(m, recordId);
  c.ids.push(e.id);
  const onScreen = S.view && S.view.type === "conv" && S.view.key === c.key;
  if (recordId > S.caughtUpAt && !onScreen) c.unread += 1; // the backlog is not "new"
  const answers = answeredId(m);
  if (answers) {
    if (!S.children.has(answers)) S.children.set(answers, []);
    S.children.get(answers).push(e.id);
    touched.add(answers);
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

export function ingest(records) {
  const touched = new Set();
  for (const r of records) {
    if (r.id <= S.lastId) continue; // never twice, whatever the network did
    S.lastId = r.id;
    if (r.kind === "redriven" || r.kind === "dropped") {
      const closed = /#(\d+)/.exec(r.reason || "");
      if (closed) S.redriven.set(Number(closed[1]), r.kind);
      continue;  // what became of a dead letter: shown on it, not as a message of its own
    }
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
      } else if (r.kind === "budget_stop") {
        // A refused send carries the refused message (its owner's own), drawn like a loop stop, under
        // what it answered; a refused model call carries the message being handled: drawn on it.
        e.budgetStops.push({ owner: r.owner, reason: r.reason });
        if (m.from_aid === r.owner) e.budgetRefused = true;
        failure(r, e.id);
      } else if (r.kind === "model_anomaly") {
        failure(r, e.id);  // an answer of the model that was not one, while this message was handled
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
    } else if (r.kind === "dead_letter" || r.kind === "loop_stop" || r.kind === "budget_stop" || r.kind === "model_anomaly") {
      failure(r, null);
    }
  }
  return touched;
}

function failure(r, messageId) {
  S.failures.push({ id: r.id, kind: r.kind, owner: r.owner, reason: r.reason || r.text || "", messageId, at: r.recorded_at });
}

// What a message answers: its in_reply_to; failing that, the first message of its thread when it
// was sent while handling that thread (a follow-up that did not name what it answers).
export function answeredId(m) {
  if (m.in_reply_to) return m.in_reply_to;
  return m.thread && m.thread !== m.message_id && m.hops ? m.thread : null;
}

// A message sits under the message it answers when that one is in the same conversation;
// otherwise it starts a thread of its own (and says what it answers).
export function parentOf(e) {
  const parentId = answeredId(e.m);
  const parent = parentId ? S.msgs.get(parentId) : null;
  return parent && parent.conv === e.conv ? parent : null;
}

// A tool_result whose tool_call is known is drawn inside that call's note, not on its own.
function drawnInsideCall(e) {
  return Boolean(e.call) && e.call.conv === e.conv;
}

export function rootOf(e) {
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

export function isThreadRoot(e) {
  return !drawnInsideCall(e) && !parentOf(e);
}

// The replies a message has, counted as the transcript counts them (aun_runtime/_transcript.py,
// `counts_as_reply`): every message that answers it, in any conversation, tool annotations aside (a
// note on the sender's own tool use is drawn among them, but it is not a reply).
export function countsAsReply(e) {
  const type = e.m.payload && e.m.payload.type;
  return type !== "tool_call" && type !== "tool_result";
}

export function replyCount(e) {
  return (S.children.get(e.id) || []).map((id) => S.msgs.get(id)).filter((child) => child && countsAsReply(child)).length;
}

export function repliesOf(e) {
  return (S.children.get(e.id) || [])
    .map((id) => S.msgs.get(id))
    .filter((child) => child && child.conv === e.conv && !drawnInsideCall(child));
}

// What became of a message. There is no "unanswered": silence is a legal answer.
export function statusOf(e) {
  if (e.loopStop) return { cls: "stopped", label: "stopped by loop guard" };
  if (e.budgetRefused) return { cls: "stopped", label: "stopped by budget" };
  // Delivered and then dead-lettered (its handler failed on it) is a failure, never a calm "delivered".
  if (e.dead.length) return { cls: "dead", label: e.receivers.length ? "delivered · dead letter" : "dead letter" };
  if (e.receivers.length) return { cls: "delivered", label: "delivered" };
  if (e.filtered.length) return { cls: "filtered", label: "filtered · archived" };
  return { cls: "sent", label: "sent" };
}

// What a person would read of a message in one line: its text, a json payload's fallback text or
// kind, a tool's name, or the payload type.
export function summaryOf(m) {
  const p = m.payload || {};
  if (p.type === "text") return p.text;
  if (p.type === "json") return p.fallback_text || p.kind;
  if (p.type === "tool_call") return `tool ${p.name}`;
  return `<${p.type}>`;
}

// Started by an agent of this archive (its agents table says so), not by an application's inbox or
// an AID from elsewhere: as the transcript's `ArchiveRoles` decides.
export function isProactive(m) {
  return !m.in_reply_to && !m.hops && role(m.from_aid) === "agent";
}
