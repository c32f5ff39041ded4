// The aun-runtime console page. Plain JavaScript, no build step.
//
// It follows the archive through one Server-Sent Events stream ("records" events, each record
// once, in archive order; the browser resumes with Last-Event-ID after a drop) and draws it the way
// AUN asks a client to: silence is "delivered", never an error; replies sit under what they answer;
// a message an agent sent on its own is "proactive"; what a channel filtered and what an agent only
// thought are muted, behind a toggle; dead letters, loop-guard stops and budget stops stand out.
import { $ } from "./dom.js";
import { S, ingest } from "./model.js";
import { drawView, drawSide } from "./views.js";
import { drawComposer, prefillTarget, startReply, submit } from "./composer.js";

// ---- navigation -------------------------------------------------------------------------------

function redraw(touched) {
  drawView(touched);
  drawComposer();
}

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
  redraw(null);
  drawSide();
}

window.addEventListener("hashchange", () => show(viewFromHash()));

// ---- the live stream --------------------------------------------------------------------------

function setConnection(state, detail) {
  const labels = { live: "live", waiting: "waiting for the archive", closed: "archive closed", error: "archive unreadable", lost: "reconnecting…", connecting: "connecting…" };
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
  } else if (S.view.type === "conv") redraw(touched);
  else redraw(null);
  drawSide();
}

function connect() {
  const stream = new EventSource("api/events");
  stream.addEventListener("hello", (ev) => onHello(JSON.parse(ev.data)));
  stream.addEventListener("records", (ev) => onRecords(JSON.parse(ev.data)));
  stream.addEventListener("agents", (ev) => {
    S.agents = new Map(JSON.parse(ev.data).map((a) => [a.aid, a]));
    drawSide();
    if (S.view) redraw(null);
  });
  stream.addEventListener("status", (ev) => { const s = JSON.parse(ev.data); setConnection(s.state, s.detail); });
  stream.addEventListener("error", () => setConnection(stream.readyState === EventSource.CLOSED ? "closed" : "lost", ""));
  stream.addEventListener("open", () => setConnection("live", ""));
}

// What each agent is busy with now: polled, since it is a snapshot of the runtime, not a record.
const BUSY_POLL_MS = 2000;

async function pollBusy() {
  try {
    const r = await fetch("api/busy");
    if (r.ok) {
      S.busy = new Map((await r.json()).map((b) => [b.aid, b]));
      drawSide();
      if (S.view && S.view.type === "agent") redraw(null);
    }
  } catch (_) { /* the connection line already says the console is offline */ }
  setTimeout(pollBusy, BUSY_POLL_MS);
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
  document.addEventListener("aun-reply", (ev) => startReply(S.msgs.get(ev.detail)));
  $("c-from").addEventListener("change", prefillTarget);
  $("reply-cancel").addEventListener("click", () => { S.replyTo = null; drawComposer(); });
  $("c-to").addEventListener("input", () => { $("c-to").dataset.touched = "1"; $("c-mentions-label").hidden = !$("c-to").value.startsWith("#"); });
  S.view = viewFromHash();
  if (S.view) drawSide();
  connect();
  pollBusy();
}

init();
