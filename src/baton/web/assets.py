"""The dashboard's script and stylesheet, served from ``/assets/`` (no external assets).

Kept as Python strings rather than package data so they ship with the code
whatever the packaging globs say, and served as files rather than inline so the
Content-Security-Policy can forbid inline script entirely (``script-src 'self'``).

The script never uses ``innerHTML``: server-rendered markup is already escaped,
and everything the script itself shows (API errors, streamed events) goes in
through ``textContent`` after ``visible()``, the browser twin of
:func:`baton.security.display.neutralize_terminal` (controls and bidi overrides
shown, not obeyed).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSS_PATH", "DASHBOARD_CSS", "DASHBOARD_JS", "JS_PATH"]

JS_PATH: Final = "/assets/dashboard.js"
CSS_PATH: Final = "/assets/dashboard.css"

DASHBOARD_JS: Final = r"""
"use strict";
(() => {
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const visible = (value) => String(value).replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    if (code === 0x7f) return "\u2421";
    return "<U+" + code.toString(16).toUpperCase().padStart(4, "0") + ">";
  });

  async function send(card, answer) {
    const status = card.querySelector(".status");
    const buttons = card.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    status.className = "status";
    status.textContent = "sending…";
    try {
      const url = "/api/requests/" + encodeURIComponent(card.dataset.requestId) + "/answer";
      const response = await fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify(answer),
      });
      const data = await response.json();
      if (response.ok) {
        status.className = "status ok";
        status.textContent = visible(
          (data.replayed ? "already answered this way: " : "answered: ") + data.state);
        card.classList.add("done");
        return;
      }
      status.className = "status error";
      status.textContent = visible(data.error + ": " + data.message);
      if (response.status === 404 || response.status === 409) {
        card.classList.add("done");
        return;
      }
    } catch (error) {
      status.className = "status error";
      status.textContent = visible("could not send: " + error);
    }
    buttons.forEach((b) => { b.disabled = false; });
  }

  function reason(card) {
    const box = card.querySelector("textarea[data-reason]");
    const text = box ? box.value.trim() : "";
    return text === "" ? null : text;
  }

  function questionAnswer(card) {
    const chosen = new Map();
    card.querySelectorAll("input[data-question]").forEach((input) => {
      const list = chosen.get(input.dataset.question) || [];
      if (input.checked) list.push(input.value);
      chosen.set(input.dataset.question, list);
    });
    const selections = [...chosen].map(([question_id, option_ids]) => ({question_id, option_ids}));
    return {kind: "question", outcome: "answered", selections, reason: reason(card)};
  }

  function formAnswer(card) {
    const content = {};
    card.querySelectorAll("[data-field]").forEach((el) => {
      const name = el.dataset.field;
      const type = el.dataset.type;
      if (type === "array") {
        const values = [...el.querySelectorAll("input:checked")].map((i) => i.value);
        if (values.length) content[name] = values;
      } else if (type === "boolean") {
        content[name] = el.checked;
      } else if (el.value !== "") {
        content[name] = type === "number" || type === "integer" ? Number(el.value) : el.value;
      }
    });
    return {kind: "elicitation", action: "accept", content};
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    const card = button && button.closest("[data-request-id]");
    if (!card) return;
    let answer;
    if (button.dataset.action === "answer") {
      answer = JSON.parse(button.dataset.answer);
      const why = "withReason" in button.dataset ? reason(card) : null;
      if (why !== null) answer.reason = why;
    } else if (button.dataset.action === "questions") {
      answer = questionAnswer(card);
    } else if (button.dataset.action === "form") {
      answer = formAnswer(card);
    } else {
      return;
    }
    send(card, answer);
  });

  const requests = document.getElementById("requests");
  if (requests) {
    const shown = new Set(requests.dataset.pending.split(" ").filter(Boolean));
    const notice = document.getElementById("notice");
    setInterval(async () => {
      try {
        const response = await fetch("/api/requests?state=pending&limit=1000",
                                     {credentials: "same-origin"});
        if (!response.ok) return;
        const ids = (await response.json()).requests.map((r) => r.request_id);
        const fresh = ids.filter((id) => !shown.has(id)).length;
        if (fresh > 0) {
          notice.textContent = fresh + " new request(s) waiting: reload the page to see them.";
          notice.hidden = false;
        }
      } catch (error) {
        // Server gone for a moment: the next tick tries again.
      }
    }, 5000);
  }

  const log = document.getElementById("events");
  if (log) {
    const state = document.getElementById("stream-state");
    const url = "/api/runs/" + encodeURIComponent(log.dataset.runId) + "/stream";
    const source = new EventSource(url);
    source.onopen = () => { state.textContent = "live"; };
    source.onmessage = (message) => {
      let line = message.data;
      try {
        const e = JSON.parse(message.data);
        line = e.seq + "  " + e.ts + "  " + e.type + "  " + JSON.stringify(e.payload);
      } catch (error) {
        // Not JSON: show the raw data.
      }
      if (line.length > 4000) line = line.slice(0, 4000) + "…";
      const item = document.createElement("li");
      item.textContent = visible(line);
      log.append(item);
      while (log.childElementCount > 5000) log.firstElementChild.remove();
    };
    source.addEventListener("end", (message) => {
      source.close();
      state.textContent = visible("run finished: " + JSON.parse(message.data).status);
    });
    source.addEventListener("failed", (message) => {
      source.close();
      state.textContent = visible("stream failed: " + JSON.parse(message.data).message);
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) state.textContent = "reconnecting…";
    };
  }
})();
"""

DASHBOARD_CSS: Final = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fbfbfa; --muted: #6b6b6b;
  --line: #d8d8d4; --ok: #1f7a3a; --bad: #b3261e; --card: #ffffff; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8e6; --bg: #161616; --muted: #9a9a9a;
  --line: #3a3a3a; --ok: #6cc786; --bad: #f28b82; --card: #1f1f1f; } }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  margin: 0 auto; max-width: 70rem; padding: 0 1rem 4rem; }
header.top { display: flex; align-items: baseline; justify-content: space-between;
  border-bottom: 1px solid var(--line); }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--bg);
  border: 1px solid var(--line); padding: .5rem; max-height: 30rem; overflow: auto; }
.request { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
  padding: .25rem 1rem 1rem; margin: 1rem 0; }
.request.done { opacity: .6; }
.request h3 { margin: .5rem 0 0; overflow-wrap: anywhere; }
.meta, .hint { color: var(--muted); font-size: 13px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 1rem; }
dt { color: var(--muted); }
dd { margin: 0; }
fieldset { border: 1px solid var(--line); margin: .5rem 0; }
label.option, label.field, label.reason { display: block; margin: .25rem 0; }
textarea { display: block; width: 100%; box-sizing: border-box; }
.actions { display: flex; gap: .5rem; margin-top: .75rem; }
button { font: inherit; padding: .3rem .9rem; cursor: pointer; }
button.allow { border: 1px solid var(--ok); }
button.deny { border: 1px solid var(--bad); }
.status.ok { color: var(--ok); }
.status.error { color: var(--bad); }
.diff .add { color: var(--ok); }
.diff .del { color: var(--bad); }
.diff .hunk, .diff .file { color: var(--muted); }
.notice { border: 1px solid var(--line); padding: .5rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .2rem .5rem; border-bottom: 1px solid var(--line);
  vertical-align: top; overflow-wrap: anywhere; }
.run-failed, .run-interrupted { color: var(--bad); }
.run-completed { color: var(--ok); }
ol.events { list-style: none; padding: 0; font: 12px/1.4 ui-monospace, monospace; }
ol.events li { border-bottom: 1px solid var(--line); padding: .1rem 0; white-space: pre-wrap;
  overflow-wrap: anywhere; }
"""
