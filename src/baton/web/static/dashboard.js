"use strict";
(async () => {
  // ------------------------------------------------------------ safe DOM helpers
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const visible = (value) => String(value === null || value === undefined ? "" : value).replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    if (code === 0x7f) return "\u2421";
    return "<U+" + code.toString(16).toUpperCase().padStart(4, "0") + ">";
  });
  // Every element the script makes goes through el(): text only via textContent.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "href") node.setAttribute("href", safeHref(value));
      else node.setAttribute(key, visible(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" || typeof child === "number" ? visible(child) : child);
    }
    return node;
  }
  // Links the script builds point into this dashboard only.
  const safeHref = (value) => (String(value).startsWith("/") && !String(value).startsWith("//")) ? String(value) : "#";
  const enc = encodeURIComponent;
  const counted = (n, word) => n + " " + word + (Number(n) === 1 ? "" : "s");
  const clip = (s, n) => { s = String(s || ""); return s.length > n ? s.slice(0, n) + "…" : s; };
  const short = (id) => String(id || "").slice(0, 12);
  // A stall in words, as baton.runner.liveness.stall_text says it on the terminal.
  const span = (ms) => {
    if (Number(ms) > 0 && Number(ms) < 1000) return (Number(ms) / 1000).toFixed(1) + "s";
    let s = Math.max(0, Math.floor(Number(ms) / 1000)) || 0;
    if (s < 60) return s + "s";
    let m = Math.floor(s / 60); s %= 60;
    if (m < 60) return m + "m " + s + "s";
    return Math.floor(m / 60) + "h " + (m % 60) + "m";
  };
  // A role prompt (the role context every turn repeats) in one line, or null for any other
  // prompt: the twin of baton.web.summaries.prompt_summary.
  function promptSummary(prompt) {
    const text = String(prompt || "");
    const head = /^\[baton\] ([^\n]+)/.exec(text);
    if (!head) return null;
    const what = head[1].trim();
    const kind = what === "FCoP role context" ? "" : what.split(":").pop().trim().toLowerCase();
    const role = /^You are ([A-Za-z0-9_-]+)\b/m.exec(text);
    const subject = /^Subject: +(.+)$/m.exec(text) || /\bon TASK-\S+ \((.+?)\)/.exec(text);
    const said = [kind, subject ? subject[1].trim() : ""].filter((x) => x).join(" · ");
    return (role ? role[1] + ": " : "") + (said || what);
  }
  const stallText = (p) => "the agent has said nothing for " + span(p.silent_ms) + (p.timeout_in_ms === null || p.timeout_in_ms === undefined ? "" : " (turn timeout in " + span(p.timeout_in_ms) + ")");

  // The session's proof half (baton.web.sessions): kept in this origin's storage, which
  // no server on another port can read, and sent with every request the script makes.
  const PROOF_KEY = "baton-proof";
  const proof = () => { try { return localStorage.getItem(PROOF_KEY) || ""; } catch (error) { return ""; } };
  const proofHeaders = () => (proof() ? {"X-Baton-Proof": proof()} : {});
  // EventSource sends no headers: the two streams take the proof in the query.
  const streamUrl = (url) => proof() ? url + (url.includes("?") ? "&" : "?") + "proof=" + encodeURIComponent(proof()) : url;
  const loginAgain = () => { try { localStorage.removeItem(PROOF_KEY); } catch (error) { /* private mode */ } location.replace("/login"); };

  async function api(method, url, body) {
    const options = {method, credentials: "same-origin", headers: proofHeaders()};
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(url, options);
    let data = {};
    try { data = await response.json(); } catch (error) { data = {error: "BadResponse", message: String(error)}; }
    return {ok: response.ok, status: response.status, data};
  }
  const errorText = (r) => visible((r.data.error || r.status) + ": " + (r.data.message || ""));
  // Whether the session is gone (``baton serve --logout-all``, expiry): then only a login helps.
  const loggedOut = async () => {
    const r = await fetch("/api/requests?limit=1", {credentials: "same-origin", headers: proofHeaders()}).catch(() => null);
    return r !== null && r.status === 401;
  };

  // ---------------------------------------------------------------------- login
  const login = document.getElementById("login");
  if (login) {
    const status = document.getElementById("login-status");
    const input = document.getElementById("login-code");
    const hash = location.hash.startsWith("#code=") ? decodeURIComponent(location.hash.slice(6)) : "";
    // The code never stays in the address bar or this history entry.
    if (location.hash) history.replaceState(null, "", location.pathname);
    const canonical = login.dataset.loginOrigin;
    if (canonical && canonical !== location.origin) {
      // Log in on the project's own host name, where no other local server gets the cookie.
      location.replace(canonical + "/login" + (hash ? "#code=" + enc(hash) : ""));
      return;
    }
    const submit = async (code) => {
      status.className = "status";
      status.textContent = "logging in…";
      const r = await api("POST", "/api/login", {code});
      if (r.ok) {
        if (r.data.proof) localStorage.setItem(PROOF_KEY, r.data.proof);
        status.className = "status ok"; status.textContent = "logged in"; location.replace("/"); return;
      }
      status.className = "status error";
      status.textContent = errorText(r);
    };
    document.getElementById("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      submit(input.value.trim());
    });
    if (hash) { input.value = hash; submit(hash); }
    return;
  }

  // ------------------------------------------------------------------- the shell
  // A navigation carries no proof, so the server answered with an empty shell: fetch
  // the same page with the proof and show it (server-rendered, escaped markup, parsed
  // by DOMParser, which runs no script), or log in again.
  if (document.getElementById("shell")) {
    if (!proof()) { loginAgain(); return; }
    let response;
    try {
      response = await fetch(location.href, {credentials: "same-origin", headers: proofHeaders()});
    } catch (error) {
      document.getElementById("shell").textContent = visible("cannot reach baton: " + error);
      return;
    }
    if (response.status === 401) { loginAgain(); return; }
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    document.title = doc.title;
    document.body.replaceWith(document.adoptNode(doc.body));
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }

  // ------------------------------------------------------------ answering cards
  async function send(card, answer) {
    const status = card.querySelector(".status");
    const buttons = card.querySelectorAll(".actions button");
    buttons.forEach((b) => { b.disabled = true; });
    status.className = "status";
    status.textContent = "sending…";
    try {
      const r = await api("POST", "/api/requests/" + enc(card.dataset.requestId) + "/answer", answer);
      if (r.ok) {
        settle(card, (r.data.replayed ? "already answered: " : "") + (r.data.decision || r.data.state));
        // A review of a tree on its own branch: the server's card says where the merge stands.
        if (card.classList.contains("kind-review")) refreshCard(card);
        return;
      }
      status.className = "status error";
      status.textContent = errorText(r);
      if (r.status === 404 || r.status === 409) { settle(card, null); return; }
    } catch (error) {
      status.className = "status error";
      status.textContent = visible("could not send: " + error);
    }
    buttons.forEach((b) => { b.disabled = false; });
  }

  // A card that no longer takes answers: its controls go, the decision stays.
  function settle(card, decision) {
    card.classList.add("done");
    const actions = card.querySelector(".actions");
    if (actions) actions.replaceChildren();
    card.querySelectorAll("input, textarea, select").forEach((i) => { i.disabled = true; });
    const expiry = card.querySelector(".expiry");
    if (expiry) expiry.remove();
    if (decision) {
      const status = card.querySelector(".status");
      status.className = "status ok";
      status.textContent = visible(decision);
    }
    const decided = document.getElementById("decided-cards");
    if (decided && card.parentElement && card.parentElement.id === "cards") {
      decided.prepend(card);
      document.getElementById("decided").hidden = false;
      while (decided.childElementCount > 20) decided.lastElementChild.remove();
    }
  }

  function reason(card) {
    const box = card.querySelector("textarea[data-reason]");
    const text = box ? box.value.trim() : "";
    return text === "" ? null : text;
  }

  // A reason the button carries (the rebase prompt) stays first; the human's words follow.
  const withCarried = (carried, typed) => carried ? (typed === null ? carried : carried + "\n\n" + typed) : typed;

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

  // "Allow and grant": allow once now, and let baton answer the same again (a grant).
  function grantAnswer(card) {
    const pick = (name) => card.querySelector(`[data-grant="${name}"]`);
    const grant = {scope: pick("scope").value, subject: pick("subject").value.trim()};
    if (pick("for").value !== "") grant.for_seconds = Number(pick("for").value);
    if (pick("uses").value !== "") grant.uses = Number(pick("uses").value);
    return {kind: "permission", decision: "allow", grant};
  }

  async function revokeGrant(button) {
    const row = button.closest("tr");
    const status = row.querySelector(".status");
    button.disabled = true;
    const r = await api("POST", "/api/grants/" + enc(button.dataset.grantId) + "/revoke", {});
    if (r.ok) {
      row.querySelector(".state").textContent = "revoked";
      row.className = "grant-revoked";
      button.remove();
      status.className = "status ok";
      status.textContent = "revoked";
      return;
    }
    status.className = "status error";
    status.textContent = errorText(r);
    button.disabled = false;
  }

  function formAnswer(card) {
    const content = {};
    card.querySelectorAll("[data-field]").forEach((node) => {
      const name = node.dataset.field;
      const type = node.dataset.type;
      if (type === "array") {
        const values = [...node.querySelectorAll("input:checked")].map((i) => i.value);
        if (values.length) content[name] = values;
      } else if (type === "boolean") {
        content[name] = node.checked;
      } else if (node.value !== "") {
        content[name] = type === "number" || type === "integer" ? Number(node.value) : node.value;
      }
    });
    return {kind: "elicitation", action: "accept", content};
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    if (button.dataset.action === "cancel-run") { cancelRun(button); return; }
    if (button.dataset.action === "cancel-turn") { cancelTurn(button); return; }
    if (button.dataset.action === "revoke-grant") { revokeGrant(button); return; }
    if (button.dataset.action === "raise-budget") { raiseBudget(button); return; }
    const card = button.closest("[data-request-id]");
    if (!card) return;
    let answer;
    if (button.dataset.action === "answer") {
      answer = JSON.parse(button.dataset.answer);
      const why = "withReason" in button.dataset ? withCarried(answer.reason, reason(card)) : null;
      if ("needsReason" in button.dataset && why === null) {
        const status = card.querySelector(".status");
        status.className = "status error";
        status.textContent = "say why it goes back: the reason is sent to the agent";
        const box = card.querySelector("textarea[data-reason]");
        if (box) box.focus();
        return;
      }
      if (why !== null) answer.reason = why;
    } else if (button.dataset.action === "grant") {
      answer = grantAnswer(card);
    } else if (button.dataset.action === "questions") {
      answer = questionAnswer(card);
    } else if (button.dataset.action === "form") {
      answer = formAnswer(card);
    } else {
      return;
    }
    send(card, answer);
  });

  // ------------------------------------------------------------------- actions
  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-action]");
    if (!form) return;
    event.preventDefault();
    const status = form.querySelector(".status");
    const data = Object.fromEntries(new FormData(form).entries());
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    status.className = "status";
    status.textContent = "sending…";
    let r;
    if (form.dataset.action === "new-task") {
      if (!form.dataset.operation) form.dataset.operation = "web-" + crypto.randomUUID();
      r = await api("POST", "/api/tasks", {to: data.to, subject: data.subject, body: data.body, operation_id: form.dataset.operation});
    } else {
      r = await api("POST", "/api/runs", {agent: data.agent, prompt: data.prompt});
    }
    button.disabled = false;
    if (!r.ok) { status.className = "status error"; status.textContent = errorText(r); return; }
    status.className = "status ok";
    status.replaceChildren();
    if (form.dataset.action === "new-task") {
      delete form.dataset.operation;
      status.append(el("a", {href: "/tasks/" + enc(r.data.task_id)}, r.data.task_id), r.data.existing ? " (already existed)" : " created for " + r.data.recipient);
    } else {
      status.append("started ", el("a", {href: "/runs/" + enc(r.data.run_id)}, r.data.run_id));
    }
    form.reset();
  });

  async function cancelRun(button) {
    const run = document.getElementById("run");
    button.disabled = true;
    const r = await api("POST", "/api/runs/" + enc(run.dataset.runId) + "/cancel");
    button.textContent = r.ok ? "cancelling…" : visible(r.data.message || "cannot cancel");
  }

  // A role's turn in a team run: the daemon cancels it, the TASK goes to needs attention.
  async function cancelTurn(button) {
    button.disabled = true;
    const body = button.dataset.task ? {task_id: button.dataset.task} : {};
    const r = await api("POST", "/api/team/slots/" + enc(button.dataset.slot) + "/cancel", body);
    button.textContent = r.ok ? "cancelling…" : visible(r.data.message || "cannot cancel");
  }
  // A budget limit in force, raised as `baton budget raise` does (the value typed beside it).
  async function raiseBudget(button) {
    const row = button.closest("[data-scope]");
    const input = row.querySelector("input[data-raise]");
    const status = row.querySelector(".status");
    button.disabled = true;
    const body = {scope: row.dataset.scope, key: row.dataset.key, dimension: input.dataset.raise, value: Number(input.value)};
    const r = await api("POST", "/api/budget/raise", body);
    button.disabled = false;
    status.className = r.ok ? "status ok" : "status error";
    status.textContent = r.ok ? "raised; baton up goes on" : errorText(r);
  }
  const SCOPE_NAME = {run: "per_run", task: "per_task", role: "per_role", window: "per_window"};
  function amount(dimension, value) {
    if (dimension === "cost_usd") return "$" + Number(value).toFixed(value && Math.abs(value) < 0.01 ? 4 : 2);
    if (dimension === "minutes") return Number(value).toFixed(1) + " min";
    return Math.round(value).toLocaleString("en-US");
  }
  function budgetRow(s) {
    const over = s.breaches.find((b) => b.level === "hard");
    const parts = Object.entries(s.limits).map(([d, limit]) => {
      const level = (s.breaches.find((b) => b.dimension === d) || {}).level;
      return el("span", {class: "spend" + (level ? " " + level : ""), "data-dimension": d}, d + " " + amount(d, s.spend[d]) + " of " + amount(d, limit) + (level === "hard" ? " OVER" : level === "soft" ? " near" : ""));
    });
    const raise = over ? el("span", {class: "raise"},
      el("input", {type: "number", min: "0", step: "any", value: String(over.limit * 2), "data-raise": over.dimension, "aria-label": "new " + over.dimension + " limit"}),
      el("button", {type: "button", class: "small", "data-action": "raise-budget"}, "Raise " + over.dimension),
      el("span", {class: "status", role: "status"})) : null;
    return el("li", {class: over ? "over" : "", "data-scope": s.scope, "data-key": s.key},
      el("strong", {}, SCOPE_NAME[s.scope] + " "), el("code", {}, s.key), " ", ...parts.flatMap((p, i) => i ? [" · ", p] : [p]), raise);
  }
  const cancelTurnButton = (slot, task, label) => el("button", {type: "button", class: "deny small", "data-action": "cancel-turn", "data-slot": slot, "data-task": task || ""}, label);

  // ------------------------------------------------------- live: inbox and board
  const liveState = document.getElementById("live-state");
  const countBadge = document.getElementById("pending-count");
  const banner = document.getElementById("banner");
  const bannerLink = document.getElementById("banner-link");
  const notifyToggle = document.getElementById("notify-toggle");
  const baseTitle = document.body.dataset.title || document.title;
  const cards = document.getElementById("cards");
  const board = document.getElementById("board");
  let knownPending = null;

  const notifyWanted = () => localStorage.getItem("baton-notify") === "on" && "Notification" in window && Notification.permission === "granted";
  if (notifyToggle && "Notification" in window) {
    const label = () => { notifyToggle.textContent = notifyWanted() ? "Notifications on" : "Notify me"; };
    notifyToggle.hidden = false;
    label();
    notifyToggle.addEventListener("click", async () => {
      if (notifyWanted()) { localStorage.setItem("baton-notify", "off"); label(); return; }
      const permission = await Notification.requestPermission();
      localStorage.setItem("baton-notify", permission === "granted" ? "on" : "off");
      label();
    });
  }

  // The newest state this page shows, as the server's time it was computed at: the
  // page's own HTML first, then each live message. An older message is ignored, so a
  // stale state (a reconnect, another tab's rebroadcast) never replaces a newer one.
  const inboxSection = document.getElementById("requests");
  let inboxAsOf = inboxSection ? Number(inboxSection.dataset.asOf) || 0 : 0;
  let boardAsOf = 0;

  function onInbox(state) {
    if (typeof state.as_of === "number") {
      if (state.as_of < inboxAsOf) return;
      inboxAsOf = state.as_of;
      if (inboxSection) inboxSection.dataset.asOf = String(state.as_of);
    }
    const pending = state.pending;
    const ids = new Set(pending.map((p) => p.request_id));
    const fresh = knownPending === null ? [] : pending.filter((p) => !knownPending.has(p.request_id));
    knownPending = ids;
    const n = pending.length;
    document.title = (n ? "(" + n + ") " : "") + baseTitle;
    if (countBadge) { countBadge.hidden = n === 0; countBadge.textContent = String(n); }
    if (banner) {
      banner.hidden = n === 0;
      bannerLink.textContent = n === 1 ? "1 request waits for you" : n + " requests wait for you";
      bannerLink.setAttribute("href", cards ? "#requests" : "/");
      if (fresh.length) banner.classList.add("fresh"); else if (n === 0) banner.classList.remove("fresh");
    }
    if (fresh.length && notifyWanted()) {
      for (const p of fresh.slice(0, 3)) {
        try { new Notification("baton: " + visible(p.kind), {body: visible(clip(p.title, 120)), tag: p.request_id}); } catch (error) { /* not allowed here */ }
      }
    }
    if (cards) syncCards(pending, state.settled);
  }

  // A card as the server renders it now (pending with its controls, or decided).
  const refreshing = new Set();
  async function fetchCard(requestId) {
    const response = await fetch("/fragments/requests/" + enc(requestId), {credentials: "same-origin", headers: proofHeaders()});
    if (!response.ok) return null;
    // Server-rendered, escaped markup (the same renderer as the page itself).
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const article = doc.querySelector("article[data-request-id]");
    return article ? document.adoptNode(article) : null;
  }
  async function refreshCard(card) {
    const id = card.dataset.requestId;
    if (refreshing.has(id)) return;
    refreshing.add(id);
    try {
      const fresh = await fetchCard(id);
      if (!fresh || !card.isConnected) return;
      if (!fresh.classList.contains("done") && !card.classList.contains("done")) {
        // Still pending, drawn again (a review's preflight moved): in place, the reason
        // kept; never under an answer on its way.
        if (card.querySelector(".actions button:disabled")) return;
        const typed = card.querySelector("textarea[data-reason]");
        const box = fresh.querySelector("textarea[data-reason]");
        if (typed && box) box.value = typed.value;
        card.replaceWith(fresh);
      } else if (fresh.classList.contains("done")) {
        card.replaceWith(fresh);
        if (fresh.parentElement && fresh.parentElement.id === "cards") settle(fresh, null);
      } else {
        // It is pending after all (a stale message settled it): back with its controls.
        card.remove();
        cards.append(fresh);
      }
    } catch (error) { /* the next message tries again */ } finally { refreshing.delete(id); }
  }

  // Converge to the message: every pending request has a live card, every other card is
  // settled; a card whose state the message contradicts is fetched again, so it can come back.
  // The settled reviews' states: when one moves (baton up merged a tree, or refused
  // to), the base may have moved, so pending reviews draw their preflight again.
  let reviewMoves = null;
  async function syncCards(pending, settled) {
    const settledById = new Map(settled.map((s) => [s.request_id, s]));
    const moves = settled.filter((s) => s.kind === "review").map((s) => s.request_id + ":" + s.state).join(",");
    const moved = reviewMoves !== null && moves !== reviewMoves;
    reviewMoves = moves;
    for (const card of [...document.querySelectorAll("article.request[data-request-id]")]) {
      const id = card.dataset.requestId;
      const shownPending = !card.classList.contains("done");
      if (knownPending.has(id)) {
        if (!shownPending || (moved && card.classList.contains("kind-review"))) refreshCard(card);
      } else if (shownPending) {
        const s = settledById.get(id);
        if (s && s.decision) settle(card, s.decision); else refreshCard(card);
      } else if (card.dataset.merge === "waiting") {
        // An accepted tree's card follows its merge: fetched again once its request moves.
        const s = settledById.get(id);
        if (s && s.state !== card.dataset.state) refreshCard(card);
      }
    }
    for (const p of pending) {
      if (document.getElementById("req-" + p.request_id)) continue;
      try {
        const article = await fetchCard(p.request_id);
        if (!article || document.getElementById("req-" + p.request_id)) continue;
        // Decided while it was fetched (a policy, another tab): straight to "Just decided".
        cards.append(article);
        if (article.classList.contains("done")) settle(article, null);
      } catch (error) { /* the next message retries */ }
    }
    const count = document.getElementById("inbox-count");
    if (count) count.textContent = String(pending.length);
    const empty = document.getElementById("inbox-empty");
    if (empty) empty.hidden = pending.length > 0;
    else if (pending.length === 0 && !cards.querySelector("article:not(.done)")) {
      cards.before(el("p", {class: "empty", id: "inbox-empty"}, "Nothing is waiting for you."));
    }
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll(".expiry[data-expires]").forEach((node) => {
      const left = Math.round((Date.parse(node.dataset.expires) - now) / 1000);
      if (Number.isNaN(left)) return;
      if (left <= 0) { node.textContent = "expired"; node.classList.add("late"); return; }
      const m = Math.floor(left / 60), s = left % 60;
      node.textContent = "expires in " + m + ":" + String(s).padStart(2, "0");
      node.classList.toggle("soon", left < 60);
    });
  }
  setInterval(tick, 1000);
  tick();

  // ---------------------------------------------------------------------- board
  const STATE_LABEL = {idle: "idle", working: "working", waiting: "waiting for you", stalled: "stalled", attention: "needs attention"};
  const taskLink = (id) => el("a", {href: "/tasks/" + enc(id)}, el("code", {}, id));
  // A task is named by its subject (the id is on its page and in its tooltip).
  const subjectLink = (id, subjects) => subjects.has(id) ? el("a", {href: "/tasks/" + enc(id), title: id}, clip(subjects.get(id), 80)) : taskLink(id);
  // What a report said, where the stage alone would hide it (a blocked child sits in done).
  const RESULT_NOTE = {blocked: "report: blocked", failed: "report: failed"};

  function onBoard(snapshot) {
    if (!board) return;
    if (typeof snapshot.as_of === "number") {
      if (snapshot.as_of < boardAsOf) return;
      boardAsOf = snapshot.as_of;
    }
    document.getElementById("board-meta").textContent = visible(snapshot.team + " · baton up " + snapshot.daemon + (snapshot.updated_at ? " · updated " + snapshot.updated_at : ""));
    const subjects = new Map(snapshot.tasks.map((t) => [t.task_id, t.subject]));
    const notes = document.getElementById("board-notes");
    notes.replaceChildren(...snapshot.notes.map((n) => el("p", {class: "notice"}, n)),
      ...snapshot.stalls.slice(-5).map((s) => el("p", {class: "notice warn"}, "stalled: ", subjectLink(s.task_id, subjects), " (" + s.role + "): " + s.reason)));
    const roles = document.getElementById("roles");
    roles.replaceChildren(...snapshot.roles.map((r) => {
      const usage = r.usage ? r.usage.input_tokens + " in / " + r.usage.output_tokens + " out tokens" + (r.usage.cost_usd ? " · $" + r.usage.cost_usd.toFixed(4) : "") : "usage unavailable";
      return el("article", {class: "role state-" + r.state, "data-role": r.name},
        el("header", {}, el("h4", {}, r.name, r.leader ? " ★" : ""), el("span", {class: "badge state-" + r.state}, STATE_LABEL[r.state] || r.state)),
        el("p", {class: "meta"}, r.agent + (r.note ? " · " + clip(r.note, 80) : "")),
        el("p", {}, "task: ", r.current_task ? subjectLink(r.current_task, subjects) : "—"),
        el("p", {class: "meta"}, counted(r.turns, "turn") + " · " + counted(r.tool_calls, "tool call") + " · " + usage),
        r.silence ? el("p", {class: "notice warn silence"}, "⏳ " + r.silence) : null,
        r.turn_running ? el("p", {}, cancelTurnButton(r.name, r.current_task, "Cancel turn")) : null,
        r.waiting_requests.length ? el("p", {}, el("a", {href: "/#requests"}, r.waiting_requests.length + " request(s) wait for you")) : null);
    }));
    const budgets = document.getElementById("budgets");
    if (budgets) {
      const rows = snapshot.budgets || [];
      budgets.replaceChildren(rows.length ? el("ul", {class: "budgets"}, ...rows.map(budgetRow)) : el("p", {class: "empty"}, "no [budget] limits in baton.toml"));
    }
    const stages = document.getElementById("stages");
    const byStage = new Map();
    for (const t of snapshot.tasks) { if (!byStage.has(t.stage)) byStage.set(t.stage, []); byStage.get(t.stage).push(t); }
    stages.replaceChildren(...["inbox", "active", "review", "done", "archive"].filter((s) => s !== "archive" || byStage.has(s)).map((stage) => {
      const tasks = byStage.get(stage) || [];
      return el("section", {class: "stage stage-" + stage, "data-stage": stage},
        el("h4", {}, stage + " (" + (snapshot.counts[stage] !== undefined ? snapshot.counts[stage] : tasks.length) + ")"),
        ...tasks.map((t) => el("article", {class: "task" + (RESULT_NOTE[t.result] ? " result-" + t.result : ""), "data-task": t.task_id},
          el("p", {class: "subject"}, el("a", {href: "/tasks/" + enc(t.task_id)}, t.subject || t.task_id)),
          RESULT_NOTE[t.result] ? el("p", {}, el("span", {class: "badge result-" + t.result}, RESULT_NOTE[t.result])) : null,
          el("p", {class: "meta"}, t.sender + " → " + t.recipient + (t.status ? " · " + t.status : "") + (t.turns ? " · " + counted(t.turns, "turn") : "")),
          t.parent ? el("p", {class: "meta"}, "part of ", subjectLink(t.parent, subjects)) : null,
          t.children.length ? el("p", {class: "meta"}, "delegated: ", ...t.children.flatMap((c, i) => i ? [", ", subjectLink(c, subjects)] : [subjectLink(c, subjects)])) : null,
          el("p", {class: "meta id"}, el("code", {}, t.task_id)))));
    }));
  }

  // One live connection per browser, not per tab: browsers allow six HTTP/1.1
  // connections per host, and every open page would otherwise hold one. The tab
  // holding the "baton-live" lock (Web Locks) streams and rebroadcasts each message
  // on a BroadcastChannel; the others listen. When that tab closes, the lock passes
  // on and the next tab connects. Every message is a whole state, so nothing is lost.
  const latest = {};
  let liveStatus = ["…", "live"];
  function showState(label, css) {
    liveStatus = [label, css];
    if (!liveState) return;
    if (label === "log in again") liveState.replaceChildren(el("a", {href: "/login"}, label));
    else liveState.textContent = label;
    liveState.className = css;
  }
  function deliver(topic, data) {
    latest[topic] = data;
    if (topic === "inbox") onInbox(JSON.parse(data));
    else if (topic === "board") onBoard(JSON.parse(data));
  }
  const channel = "BroadcastChannel" in window ? new BroadcastChannel("baton-live") : null;
  let leader = false;
  function lead() {
    leader = true;
    let source;
    const broadcast = (message) => { if (channel) channel.postMessage(message); };
    const status = (label, css) => { showState(label, css); broadcast({type: "state", label, css}); };
    const connect = () => {
      source = new EventSource(streamUrl("/api/live?topics=inbox,board"));
      source.onopen = () => status("live", "live on");
      for (const topic of ["inbox", "board"]) {
        source.addEventListener(topic, (m) => { deliver(topic, m.data); broadcast({type: "event", topic, data: m.data}); });
      }
      source.onerror = () => {
        if (source.readyState !== EventSource.CLOSED) { status("reconnecting…", "live off"); return; }
        // Refused: logged out (say so now), or the server said no (ask again in a while).
        status("offline", "live off");
        loggedOut().then((out) => { if (out) status("log in again", "live off"); else setTimeout(connect, 3000); });
      };
    };
    connect();
    return new Promise(() => {});  // hold the lock while this tab lives
  }
  if (liveState) {
    if (channel && navigator.locks) {
      channel.onmessage = (m) => {
        const msg = m.data || {};
        if (msg.type === "event" && !leader) deliver(msg.topic, msg.data);
        else if (msg.type === "state" && !leader) showState(msg.label, msg.css);
        else if (msg.type === "hello" && leader) {
          for (const [topic, data] of Object.entries(latest)) channel.postMessage({type: "event", topic, data});
          channel.postMessage({type: "state", label: liveStatus[0], css: liveStatus[1]});
        }
      };
      channel.postMessage({type: "hello"});
      navigator.locks.request("baton-live", lead);
    } else {
      lead();
    }
  }

  // ------------------------------------------------------------------- run view
  // Paths relative to the run's workspace, as the cards on the inbox show them
  // (baton.web.dashboard.shown_path); one outside it whole, and said to be outside.
  const runNode = document.getElementById("run");
  const workspace = runNode ? String(runNode.dataset.workspace || "").replace(/\/+$/, "") : "";
  function relative(path) {
    const text = String(path || "");
    if (!workspace || !text.startsWith("/")) return text;
    if (text === workspace) return ".";
    if (text.startsWith(workspace + "/")) return text.slice(workspace.length + 1);
    return text + " (outside the workspace)";
  }

  const run = document.getElementById("run");
  if (run) runView(run);

  function lineDiff(oldText, newText) {
    const a = oldText === null || oldText === undefined ? [] : String(oldText).split("\n");
    const b = String(newText || "").split("\n");
    const rows = [];
    if (a.length * b.length > 4000000) {
      a.forEach((l, i) => rows.push(["del", i + 1, "", l]));
      b.forEach((l, i) => rows.push(["add", "", i + 1, l]));
      return rows;
    }
    const n = a.length, m = b.length;
    const lcs = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] === b[j]) { rows.push(["ctx", i + 1, j + 1, a[i]]); i++; j++; }
      else if (j < m && (i >= n || lcs[i][j + 1] >= lcs[i + 1][j])) { rows.push(["add", "", j + 1, b[j]]); j++; }
      else { rows.push(["del", i + 1, "", a[i]]); i++; }
    }
    return rows;
  }

  function diffFigure(diff) {
    const rows = lineDiff(diff.old_text, diff.new_text).map(([css, l, r, text]) =>
      el("tr", {class: css}, el("td", {class: "ln"}, String(l)), el("td", {class: "ln"}, String(r)),
        el("td", {}, el("pre", {}, (css === "add" ? "+" : css === "del" ? "-" : " ") + text))));
    return el("figure", {class: "diff"}, el("figcaption", {}, relative(diff.path) + (diff.old_text === null ? " (new file)" : "") + (diff.truncated ? " (truncated preview)" : "")),
      el("table", {class: "diff-lines"}, ...rows));
  }

  function runView(root) {
    const runId = root.dataset.runId;
    const lanes = document.getElementById("lanes");
    const rawLog = document.getElementById("events");
    const state = document.getElementById("stream-state");
    const countNode = document.getElementById("run-count");
    const statusNode = document.getElementById("run-status");
    const plan = document.getElementById("plan");
    const jump = document.getElementById("jump-live");
    const showThoughts = document.getElementById("show-thoughts");
    const showRaw = document.getElementById("show-raw");
    let roles = {};
    const laneNodes = new Map();
    const messages = new Map();
    const tools = new Map();
    const delegations = new Map();
    let count = Number(countNode.textContent) || 0;
    let drawnSeq = 0;
    let refreshTimer = null;

    // Raw lines are kept as data and only become elements while "raw events" is on.
    const rawLines = [];
    const rawItem = (line) => el("li", {}, clip(line, 4000));
    showRaw.addEventListener("change", () => {
      rawLog.hidden = !showRaw.checked;
      rawLog.replaceChildren(...(showRaw.checked ? rawLines.map(rawItem) : []));
    });
    showThoughts.addEventListener("change", () => {
      root.querySelectorAll("details.thought").forEach((d) => { d.open = showThoughts.checked; });
    });

    const atBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    jump.addEventListener("click", () => { window.scrollTo(0, document.body.scrollHeight); jump.hidden = true; });
    window.addEventListener("scroll", () => { if (atBottom()) jump.hidden = true; });

    const laneRole = (sessionId) => roles[sessionId] || (root.dataset.kind === "up" ? "team" : "agent");
    function lane(sessionId) {
      const role = laneRole(sessionId);
      if (!laneNodes.has(role)) {
        const body = el("div", {class: "lane-body"});
        const node = el("section", {class: "lane", "data-lane": role}, el("h3", {class: "lane-title"}, role), body);
        lanes.append(node);
        laneNodes.set(role, body);
      }
      return laneNodes.get(role);
    }

    async function refresh() {
      const r = await api("GET", "/api/runs/" + enc(runId));
      if (!r.ok) return;
      roles = r.data.roles || {};
      statusNode.textContent = visible(r.data.outcome.label);
      statusNode.className = "tone-" + r.data.outcome.tone;
      const list = document.getElementById("run-requests");
      list.replaceChildren(...r.data.requests.map((q) => el("li", {}, el("a", {href: "/#req-" + q.request_id}, q.title), " ", el("span", {class: "hint"}, q.kind + " · " + (q.decision || q.state)))));
      // A request waiting in a lane reads by the server's title (a review by its subject).
      for (const q of r.data.requests) {
        for (const asked of document.querySelectorAll("p.notice.request[data-request]:not(.cleared)")) {
          if (asked.dataset.request !== q.request_id || asked.dataset.title === q.title) continue;
          asked.dataset.title = q.title;
          asked.replaceChildren("waiting for you: " + visible(q.title) + " ", el("a", {href: "/#req-" + q.request_id}, "answer"));
        }
      }
      document.getElementById("run-requests-count").textContent = String(r.data.requests.length);
      const cancel = root.querySelector("[data-action=cancel-run]");
      if (cancel && r.data.status !== "running") cancel.remove();
      if (root.dataset.kind === "up") laneCancels(r.data.status === "running");
    }
    // Team runs: a lane gets a Cancel button for each working slot of its role.
    async function laneCancels(running) {
      const t = running ? await api("GET", "/api/team") : {ok: false};
      lanes.querySelectorAll(".lane-cancel").forEach((n) => n.remove());
      if (!t.ok) return;
      for (const s of t.data.roles) {
        const title = lanes.querySelector('[data-lane="' + CSS.escape(s.role) + '"] .lane-title');
        if (!title || !s.turn_running) continue;
        const button = cancelTurnButton(s.name, s.current_task, s.name === s.role ? "Cancel turn" : "Cancel " + s.name + "'s turn");
        button.classList.add("lane-cancel");
        title.append(" ", button);
      }
    }
    const refreshSoon = () => { if (!refreshTimer) refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 300); };

    function toolCard(e) {
      const p = e.payload;
      let card = tools.get(p.tool_call_id);
      if (!card) {
        const summary = el("summary", {});
        const body = el("div", {class: "tool-body"});
        const node = el("details", {class: "tool", "data-tool": p.tool_call_id}, summary, body);
        card = {node, summary, body, started: Date.parse(e.ts)};
        tools.set(p.tool_call_id, card);
        lane(e.session_id).append(node);
      }
      const duration = p.duration_ms !== undefined && p.duration_ms !== null ? (p.duration_ms / 1000).toFixed(1) + " s" : (p.status === "in_progress" || p.status === "pending" ? "running" : "");
      card.node.className = "tool status-" + p.status;
      card.summary.replaceChildren(el("span", {class: "badge status-" + p.status}, p.status), " ", el("strong", {}, clip(p.title, 200)), " ", el("span", {class: "hint"}, p.kind + (duration ? " · " + duration : "")));
      const parts = [];
      const input = p.raw_input && typeof p.raw_input === "object" ? p.raw_input : null;
      const command = input && (input.command || input.cmd);
      if (command) parts.push(el("pre", {class: "command"}, "$ " + (Array.isArray(command) ? command.join(" ") : command)));
      if (p.locations && p.locations.length) parts.push(el("p", {class: "paths"}, "paths: " + p.locations.map((l) => relative(l.path) + (l.line ? ":" + l.line : "")).join(", ")));
      if (p.output) parts.push(el("p", {class: "hint"}, "output" + (p.output.truncated ? " (last part of " + p.output.total_bytes + " bytes)" : "")), el("pre", {class: "output"}, p.output.tail));
      for (const diff of p.diffs || []) parts.push(diffFigure(diff));
      if (!parts.length && input) parts.push(el("pre", {class: "raw"}, clip(JSON.stringify(input, null, 2), 4000)));
      card.body.replaceChildren(...parts);
      if (p.status === "failed") card.node.open = true;
    }

    // One plan per role (each role's agent keeps its own), each with its revisions. A
    // step the agent calls completed is not ticked when its tool call failed or was
    // denied: the rule of the terminal's view (baton.cli.render.plan_mark).
    const PLAN_MARK = {completed: "☑", in_progress: "◐", blocked: "☒", pending: "☐"};
    const plansByRole = new Map();
    const toolOutcome = new Map();  // role -> Map(tool title -> its last final status)
    function stepState(role, step) {
      const outcome = (toolOutcome.get(role) || new Map()).get(step.content);
      if (step.status === "completed" && outcome === "failed") return ["failed", "✘"];
      if (step.status === "completed" && outcome === "cancelled") return ["cancelled", "■"];
      if (step.native_status === "cancelled") return ["cancelled", "■"];
      return [step.status, PLAN_MARK[step.status] || "☐"];
    }
    function planBox(role) {
      let entry = plansByRole.get(role);
      if (!entry) {
        const node = el("section", {class: "plan", "data-plan-role": role});
        plan.append(node);
        entry = {node, revisions: [], shown: null};
        plansByRole.set(role, entry);
      }
      return entry;
    }
    function showPlan(role, rev) {
      const entry = planBox(role);
      entry.shown = rev;
      const steps = rev.steps.map((s) => {
        const [state, mark] = stepState(role, s);
        return el("li", {class: "step-" + state, "data-step-state": state}, el("span", {class: "check"}, mark), " ", s.content, state === "failed" ? el("span", {class: "hint"}, " (failed or denied)") : state === "cancelled" ? el("span", {class: "hint"}, " (cancelled)") : null);
      });
      const picker = entry.revisions.length > 1 ? el("p", {class: "revisions"}, "revisions: ", ...entry.revisions.map((r) => {
        const b = el("button", {type: "button", class: "small" + (r === rev ? " current" : "")}, String(r.revision));
        b.addEventListener("click", () => showPlan(role, r));
        return b;
      })) : null;
      const who = plansByRole.size > 1 || root.dataset.kind === "up" ? role + "'s plan" : "Plan";
      entry.node.replaceChildren(el("h3", {}, who + " · revision " + rev.revision), el("ul", {class: "checklist"}, ...steps), picker);
    }
    function renderPlan(e) {
      const role = laneRole(e.session_id);
      const entry = planBox(role);
      entry.revisions.push(e.payload);
      plan.hidden = false;
      showPlan(role, e.payload);
    }
    function noteToolOutcome(e) {
      const p = e.payload;
      if (!["completed", "failed", "cancelled"].includes(p.status)) return;
      const role = laneRole(e.session_id);
      if (!toolOutcome.has(role)) toolOutcome.set(role, new Map());
      toolOutcome.get(role).set(p.title, p.status);
      const entry = plansByRole.get(role);
      if (entry && entry.shown) showPlan(role, entry.shown);
    }

    function notice(e, css, textValue, link) {
      const node = el("p", {class: "notice " + css}, textValue, link || null);
      lane(e.session_id).append(node);
      return node;
    }

    const TURN_EDGES = new Set(["turn.submitted", "turn.completed", "turn.failed", "turn.cancelled"]);
    function render(e) {
      const p = e.payload || {};
      const t = e.type;
      if (root.dataset.kind === "up" && TURN_EDGES.has(t)) refreshSoon(); // the lanes' Cancel buttons
      if (t === "transcript.assistant" || t === "transcript.thinking" || t === "transcript.user") {
        // Chunks arrive coalesced, in order: append to the message while it is the
        // last thing in its lane; anything in between starts a new block.
        const body = lane(e.session_id);
        const key = t + ":" + p.message_id;
        let node = messages.get(key);
        if (!node || body.lastElementChild !== node) {
          if (t === "transcript.thinking") {
            const text = el("div", {class: "text"});
            node = el("details", {class: "thought"}, el("summary", {}, "thinking"), text);
            node.open = showThoughts.checked;
            node.textTarget = text;
          } else {
            node = el("div", {class: t === "transcript.user" ? "msg user" : "msg assistant"});
            node.textTarget = node;
          }
          messages.set(key, node);
          body.append(node);
        }
        node.textTarget.append(visible(p.text));
      } else if (t.startsWith("tool.execution.")) {
        toolCard(e);
        noteToolOutcome(e);
      } else if (t === "turn.submitted") {
        const said = promptSummary(p.prompt_preview);
        if (said === null) {
          lane(e.session_id).append(el("div", {class: "msg prompt"}, el("span", {class: "tag"}, "prompt"), " ", clip(p.prompt_preview, 2000)));
        } else {
          // The role context repeats on every turn: one line, the whole text on demand.
          lane(e.session_id).append(el("details", {class: "msg prompt role-context"}, el("summary", {}, el("span", {class: "tag"}, "prompt"), " ", said),
            el("pre", {}, clip(p.prompt_preview, 4000))));
        }
      } else if (t === "turn.stalled") {
        notice(e, "turn warn stall", "⏳ " + stallText(p));
        refreshSoon();
      } else if (t === "turn.resumed") {
        lane(e.session_id).querySelectorAll("p.stall:not(.cleared)").forEach((n) => n.classList.add("cleared"));
        notice(e, "turn resumed", "▸ the agent spoke again after " + span(p.silent_ms) + " of silence");
        refreshSoon();
      } else if (t === "turn.completed") {
        notice(e, "turn ok", "turn ended: " + p.stop_reason + " · " + (p.duration_ms / 1000).toFixed(1) + " s");
      } else if (t === "turn.failed") {
        notice(e, "turn bad", "turn failed: " + p.error_type + ": " + p.message);
      } else if (t === "turn.cancelled") {
        notice(e, "turn warn", "turn cancelled: " + p.reason);
      } else if (t === "plan.updated") {
        renderPlan(e);
      } else if (t.startsWith("delegation.")) {
        const key = p.source + ":" + (p.children[0] ? p.children[0].parent_tool_call_id || "" : "");
        let node = delegations.get(key);
        if (!node) { node = el("div", {class: "delegation"}); delegations.set(key, node); lane(e.session_id).append(node); }
        node.replaceChildren(el("h4", {}, "delegation (" + p.source + ")"), el("ul", {class: "tree"}, ...p.children.map((c) => el("li", {}, (c.role || c.agent_id || c.child_id) + (c.description ? ": " + clip(c.description, 200) : "") + " · " + (c.status || "started")))));
      } else if (t.startsWith("security.")) {
        notice(e, "security", "security: " + t.slice(9) + " · " + p.control + ": " + p.subject + " — " + p.reason);
      } else if (t === "request.created") {
        const asked = notice(e, "request", "waiting for you: " + p.title + " ", el("a", {href: "/#req-" + p.request_id}, "answer"));
        asked.dataset.request = p.request_id;
        asked.dataset.title = p.title;
        refreshSoon();
      } else if (t.startsWith("request.")) {
        const what = t === "request.answered" ? "answered " + (p.decided_by || "") + (p.rule ? " (" + p.rule + ")" : "") : t.slice(8) + (p.reason ? ": " + p.reason : "");
        // The request no longer waits: its "waiting for you" line says so (no reload needed).
        for (const asked of document.querySelectorAll("p.notice.request[data-request]")) {
          if (asked.dataset.request !== p.request_id || asked.classList.contains("cleared")) continue;
          asked.classList.add("cleared");
          asked.replaceChildren("asked: " + asked.dataset.title + " · " + what);
        }
        notice(e, "request done", p.kind + " " + short(p.request_id) + " " + what);
        refreshSoon();
      } else if (t === "provider.notice" || t === "harness.diagnostic") {
        const stall = /stall|breaker|paus/i.test(p.category + " " + p.summary);
        notice(e, (stall ? "stall " : "") + (p.severity || "info"), (stall ? "stall: " : "") + p.category + ": " + p.summary);
      } else if (t === "session.started") {
        notice(e, "session", "session " + p.how + " · " + p.agent);
      } else if (t === "session.failed") {
        notice(e, "bad", "session failed: " + p.error_type + ": " + p.message);
      } else if (t === "usage.reported") {
        if (p.available) notice(e, "usage", "usage: " + (p.input_tokens || 0) + " in / " + (p.output_tokens || 0) + " out");
      }
    }

    refresh().finally(() => follow());

    function follow() {
    // A new connection (after the old one was refused) resumes after the last event drawn.
    const source = new EventSource(streamUrl("/api/runs/" + enc(runId) + "/stream" + (drawnSeq ? "?after=" + drawnSeq : "")));
    source.onopen = () => { state.textContent = "live"; };
    // Events are drawn once per frame, in a batch: a flooding agent costs one
    // layout and one scroll per frame, not one per event.
    const queue = [];
    let scheduled = false;
    const draw = () => {
      scheduled = false;
      const follow = atBottom();
      for (const data of queue.splice(0)) {
        let e = null;
        try { e = JSON.parse(data); } catch (error) { /* shown raw below */ }
        rawLines.push(data);  // the canonical line, as stored
        if (showRaw.checked) rawLog.append(rawItem(data));
        if (!e) continue;
        if (e.session_id && !(e.session_id in roles) && root.dataset.kind === "up" && e.type === "session.started") refreshSoon();
        try { render(e); } catch (error) { /* one odd event never stops the view */ }
        count = Math.max(count, e.seq);
        drawnSeq = Math.max(drawnSeq, e.seq);
      }
      if (rawLines.length > 5000) rawLines.splice(0, rawLines.length - 5000);
      while (rawLog.childElementCount > 5000) rawLog.firstElementChild.remove();
      countNode.textContent = String(count);
      if (follow) window.scrollTo(0, document.body.scrollHeight); else jump.hidden = false;
    };
    source.onmessage = (message) => {
      queue.push(message.data);
      if (scheduled) return;
      scheduled = true;
      if (document.hidden) setTimeout(draw, 100); else requestAnimationFrame(draw);
    };
    source.addEventListener("end", (message) => {
      source.close();
      state.textContent = visible("run finished: " + JSON.parse(message.data).status);
      refresh();
    });
    source.addEventListener("failed", (message) => {
      source.close();
      state.textContent = visible("stream failed: " + JSON.parse(message.data).message);
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) { state.textContent = "reconnecting…"; return; }
      loggedOut().then((out) => {
        if (out) state.replaceChildren(el("a", {href: "/login"}, "log in again"));
        else { state.textContent = "disconnected"; setTimeout(follow, 3000); }
      });
    };
    }
  }
})();
