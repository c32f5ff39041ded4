// Sending as a local agent from the page: shown only when the console allows it.
import { $, h, snip } from "./dom.js";
import { S, summaryOf } from "./model.js";


function localAids() {
  return [...S.agents.values()].map((a) => a.aid);
}

export function drawComposer() {
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
    $("reply-what").textContent = `${S.replyTo.m.from_aid}: “${snip(summaryOf(S.replyTo.m), 50)}”`;
  } else $("reply-chip").hidden = true;
  prefillTarget();
}

// Unless the user typed a recipient, write to the conversation on screen: its group, or the
// other side of the pair from the chosen sender.
export function prefillTarget() {
  const v = S.view;
  const c = v && v.type === "conv" ? S.convs.get(v.key) : null;
  const to = $("c-to");
  if (!to.dataset.touched && c) {
    const sender = $("c-from").value;
    to.value = c.kind === "group" ? `#${c.gid}` : c.pair.find((aid) => aid !== sender) || c.pair[0];
  }
  $("c-mentions-label").hidden = !to.value.startsWith("#");
}

export function startReply(e) {
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

export async function submit(event) {
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
