// The live queue (and the request detail page): cards arrive and change over /ws/dashboard/.
//
// Protocol (relay/consumers/dashboard.py): send {"type":"subscribe"} first; the server answers
// with a snapshot of pending cards in parts {requests, part, parts} (frames stay small); once
// the last part arrived the list replaces the queue (it is the truth after any gap),
// then pushes request.created / decided / cancelled / expired with the card's HTML,
// request.claimed / request.released {id, by} ("alice is reviewing") and request.progress {id, data}.
// Card HTML is rendered and escaped by the server from the same partial the page uses.
"use strict";
(() => {
  const queue = document.getElementById("queue");
  if (!queue) return;
  const recent = document.getElementById("recent");
  // "Recently decided" keeps the newest few (the server's RECENT_FINISHED); older ones drop off.
  const keepRecent = recent ? Number(recent.dataset.keep) || 0 : 0;
  const empty = document.getElementById("queue-empty");
  const live = document.getElementById("live");
  const only = queue.dataset.only || null;
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrf = csrfMeta ? csrfMeta.content : "";
  const baseTitle = document.title.replace(/^\(\d+\) /, "");
  const PROGRESS_LIMIT = 20000;
  let socket = null;
  let backoff = 500;
  let stopped = false;
  let openId = null;
  // Every pending request of the person's teams, from the snapshot and the pushes: the
  // nav badge and the title count these, not the cards this page happens to show.
  let pendingIds = null;
  let snapshotParts = [];

  function setLive(state, text) {
    if (!live) return;
    live.dataset.state = state;
    live.textContent = text;
  }

  function fromHtml(html) {
    const template = document.createElement("template");
    template.innerHTML = String(html || "").trim();
    return template.content.firstElementChild;
  }

  function countPending() {
    const shown = document.querySelectorAll('#queue .card[data-state="pending"]').length;
    const total = document.getElementById("pending-total");
    if (total) total.textContent = String(shown);
    const nav = document.getElementById("nav-count");
    if (pendingIds) {
      const n = pendingIds.size;
      document.title = (n ? "(" + n + ") " : "") + baseTitle;
      if (nav) { nav.textContent = String(n); nav.dataset.count = String(n); }
    }
    if (empty) empty.hidden = queue.querySelector(".card") !== null;
    batches();
    tick();
  }

  function place(id, html) {
    const card = fromHtml(html);
    if (!card) return;
    if (pendingIds) {
      if (card.dataset.state === "pending") pendingIds.add(id); else pendingIds.delete(id);
    }
    if (only && id !== only) { countPending(); return; }
    const existing = document.getElementById("req-" + id);
    if (existing) {
      // Keep the person's half-typed deny reason if the card is re-rendered while pending.
      const typed = existing.querySelector('input[name="message"]');
      existing.replaceWith(card);
      const again = card.querySelector('input[name="message"]');
      if (typed && again) again.value = typed.value;
    } else if (card.dataset.state === "pending") {
      queue.append(card);
    } else if (recent && !only) {
      recent.prepend(card);
      while (keepRecent && recent.children.length > keepRecent) recent.lastElementChild.remove();
    }
    if (card.dataset.state !== "pending") {
      card.classList.add("just-finished");
      if (openId === id) openId = null;
    }
    countPending();
  }

  function snapshot(requests) {
    pendingIds = new Set(requests.map((r) => r.id));
    if (only) {
      const mine = requests.find((r) => r.id === only);
      if (mine) place(mine.id, mine.html);
      countPending();
      return;
    }
    const fragment = document.createDocumentFragment();
    for (const item of requests) {
      const card = fromHtml(item.html);
      if (card) fragment.append(card);
    }
    queue.replaceChildren(fragment);
    countPending();
  }

  function reviewing(id, by) {
    const card = document.getElementById("req-" + id);
    const note = card && card.querySelector(".reviewing");
    if (!note) return;
    note.textContent = by ? by + " is reviewing" : "";
    note.hidden = !by;
  }

  function progress(id, data) {
    const card = document.getElementById("req-" + id);
    const out = card && card.querySelector(".progress");
    if (!out) return;
    const text = typeof data === "string" ? data : JSON.stringify(data);
    out.hidden = false;
    out.textContent = (out.textContent + text + (text.endsWith("\n") ? "" : "\n")).slice(-PROGRESS_LIMIT);
    out.scrollTop = out.scrollHeight;
  }

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function onMessage(event) {
    let msg;
    try { msg = JSON.parse(event.data); } catch (e) { return; }
    handle(msg);
  }

  function handle(msg) {
    switch (msg.type) {
      case "snapshot":
        if (msg.part === 1 || !msg.part) snapshotParts = [];
        snapshotParts.push(...(msg.requests || []));
        if ((msg.part || 1) < (msg.parts || 1)) break;
        snapshot(snapshotParts);
        snapshotParts = [];
        // Live from here on: the list is the server's truth and every later push will arrive.
        setLive("live", "live");
        break;
      case "request.created":
      case "request.updated":
      case "request.decided":
      case "request.cancelled":
      case "request.expired": place(msg.id, msg.html); break;
      // Calls decided as they were sent, gathered per tick: each one as if sent alone.
      case "batch": (msg.frames || []).forEach(handle); break;
      case "request.claimed": reviewing(msg.id, msg.by); break;
      case "request.released": reviewing(msg.id, null); break;
      case "request.progress": progress(msg.id, msg.data); break;
      case "session.ended": stop("logged out"); break;
      default: break;
    }
  }

  function stop(reason) {
    stopped = true;
    setLive("offline", reason);
    if (socket) socket.close();
    if (reason === "logged out") window.location.assign("/accounts/login/");
  }

  function connect() {
    if (stopped) return;
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    setLive("connecting", "connecting…");
    socket = new WebSocket(scheme + window.location.host + (queue.dataset.ws || "/ws/dashboard/"));
    socket.addEventListener("open", () => {
      backoff = 500;
      send({ type: "subscribe" });
      if (openId) send({ type: "open", id: openId });
    });
    socket.addEventListener("message", onMessage);
    socket.addEventListener("close", (event) => {
      // 4401/4403: the session is gone (logged out here or elsewhere): do not hammer.
      if (event.code === 4401 || event.code === 4403) { stop("logged out"); return; }
      if (stopped) return;
      setLive("offline", "reconnecting…");
      window.setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 10000);
    });
  }

  // --- deciding ---------------------------------------------------------------------------

  async function decide(form, submitter) {
    const data = new FormData(form, submitter);
    if (!data.get("csrfmiddlewaretoken")) data.set("csrfmiddlewaretoken", csrf);
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    const error = form.querySelector(".form-error");
    try {
      const response = await fetch(form.getAttribute("action"), {
        method: "POST",
        body: data,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrf },
      });
      let body = null;
      try { body = await response.json(); } catch (e) { body = null; }
      if (body && body.html) place(body.id, body.html);
      if (!response.ok) {
        const fresh = document.getElementById(form.closest(".card").id);
        const target = (fresh && fresh.querySelector(".form-error")) || error;
        const text = (body && body.message) || "The server said " + response.status + ".";
        if (target) { target.textContent = text; target.hidden = false; }
        const note = fresh && fresh.querySelector(".outcome");
        if (!target && note) note.title = text;
      }
    } catch (e) {
      if (error) { error.textContent = "Could not reach Gatehouse; try again."; error.hidden = false; }
    } finally {
      buttons.forEach((b) => { if (!b.classList.contains("noop")) b.disabled = false; });
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.id === "logout-form") { stopped = true; return; }
    if (form instanceof HTMLFormElement && form.classList.contains("batch")) {
      event.preventDefault();
      decideBatch(form, event.submitter);
      return;
    }
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("decide")) return;
    event.preventDefault();
    decide(form, event.submitter);
  });

  // Enter in the reason field means "Deny with this reason", never the first button.
  document.addEventListener("keydown", (event) => {
    const input = event.target;
    if (event.key !== "Enter" || !(input instanceof HTMLInputElement) || input.name !== "message") return;
    const form = input.form;
    const deny = form && form.querySelector('button[value="deny"]');
    if (deny) { event.preventDefault(); deny.click(); }
  });

  // --- batches: identical pending calls, decided in one press ------------------------------
  // Cards of the same call (agent, session, cwd, tool, input: the server's data-batch key)
  // get one bar before the first of them: "Allow all 6" posts exactly the ids it shows,
  // and the server decides each through the race on its own, with its own audit row.

  function batchGroups() {
    const groups = new Map();
    queue.querySelectorAll('.card[data-state="pending"][data-batch]').forEach((card) => {
      const list = groups.get(card.dataset.batch) || [];
      list.push(card);
      groups.set(card.dataset.batch, list);
    });
    return groups;
  }

  function batchButton(action, css) {
    const button = document.createElement("button");
    button.type = "submit";
    button.name = "action";
    button.value = action;
    button.className = "btn " + css;
    return button;
  }

  function makeBar(key) {
    const bar = document.createElement("form");
    bar.className = "batch";
    bar.dataset.batch = key;
    bar.method = "post";
    bar.action = "/requests/decide-batch";
    const text = document.createElement("p");
    text.className = "batch-text";
    const buttons = document.createElement("div");
    buttons.className = "buttons";
    buttons.append(batchButton("once", "btn-allow"), batchButton("deny", "btn-deny"));
    const error = document.createElement("p");
    error.className = "form-error";
    error.setAttribute("role", "alert");
    error.hidden = true;
    bar.append(text, buttons, error);
    return bar;
  }

  function fillBar(bar, cards) {
    const n = cards.length;
    const label = cards[0].dataset.batchLabel || "";
    bar.querySelector(".batch-text").textContent = n + " identical calls: " + label;
    bar.setAttribute("aria-label", n + " identical calls: " + label);
    const allow = bar.querySelector('button[value="once"]');
    const deny = bar.querySelector('button[value="deny"]');
    allow.textContent = "Allow all " + n;
    allow.setAttribute("aria-label", "Allow all " + n + ": " + label);
    deny.textContent = "Deny all " + n;
    deny.setAttribute("aria-label", "Deny all " + n + ": " + label);
    bar.querySelectorAll('input[type="hidden"]').forEach((input) => input.remove());
    for (const card of cards) {
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = "ids";
      input.value = card.dataset.id;
      bar.append(input);
    }
  }

  function batches() {
    if (only) return;
    const groups = batchGroups();
    queue.querySelectorAll(".batch").forEach((bar) => {
      const cards = groups.get(bar.dataset.batch);
      if (!cards || cards.length < 2 || bar.nextElementSibling !== cards[0]) bar.remove();
    });
    for (const [key, cards] of groups) {
      if (cards.length < 2) continue;
      let bar = cards[0].previousElementSibling;
      if (!bar || !bar.classList.contains("batch")) {
        bar = makeBar(key);
        cards[0].before(bar);
      }
      fillBar(bar, cards);
    }
  }

  async function decideBatch(form, submitter) {
    const data = new FormData(form, submitter);
    data.set("csrfmiddlewaretoken", csrf);
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    let body = null;
    let status = 0;
    try {
      const response = await fetch(form.getAttribute("action"), {
        method: "POST",
        body: data,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrf },
      });
      status = response.status;
      try { body = await response.json(); } catch (e) { body = null; }
    } catch (e) {
      body = { message: "Could not reach Gatehouse; try again." };
    }
    for (const item of (body && body.cards) || []) place(item.id, item.html);
    const text = (body && body.message) || "The server said " + status + ".";
    const note = document.getElementById("queue-status");
    if (note) note.textContent = text;
    if (form.isConnected) {
      buttons.forEach((b) => { b.disabled = false; });
      const error = form.querySelector(".form-error");
      if (error && status !== 200) { error.textContent = text; error.hidden = false; }
    }
  }

  // --- keyboard: n/j next request, p/k previous, a allow once, d deny ------------------------
  // Allow and Deny act only on the card that has the focus (reached with n, Tab or a tap),
  // never on a card the person has not gone to.

  function typing(target) {
    return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement ||
      target instanceof HTMLSelectElement || (target instanceof HTMLElement && target.isContentEditable);
  }

  function moveFocus(step) {
    const cards = Array.from(queue.querySelectorAll('.card[data-state="pending"]'));
    if (!cards.length) return;
    const current = document.activeElement instanceof Element ? document.activeElement.closest(".card") : null;
    const at = cards.indexOf(current);
    const next = at < 0 ? cards[0] : cards[(at + step + cards.length) % cards.length];
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const key = event.key;
    if (key === "n" || key === "j" || key === "p" || key === "k") {
      event.preventDefault();
      moveFocus(key === "n" || key === "j" ? 1 : -1);
      return;
    }
    if (key !== "a" && key !== "d") return;
    const card = event.target instanceof Element ? event.target.closest('.card[data-state="pending"]') : null;
    const button = card && card.querySelector(key === "a" ? 'button[value="once"]' : 'button[value="deny"]');
    if (button && !button.disabled) { event.preventDefault(); button.click(); }
  });

  // --- "alice is reviewing" -------------------------------------------------------------------

  function opened(card) {
    const id = card && card.dataset.state === "pending" ? card.dataset.id : null;
    if (id === openId) return;
    if (openId) send({ type: "close", id: openId });
    openId = id;
    if (id) send({ type: "open", id: id });
  }
  queue.addEventListener("focusin", (event) => opened(event.target.closest(".card")));
  queue.addEventListener("pointerdown", (event) => opened(event.target.closest(".card")));
  // Back on the tab: fetch the list afresh. The channel layer rings each doorbell at most
  // once, so a push lost while the phone slept would otherwise leave a stale card until the
  // next reconnect. (The server refuses a second snapshot within 2 s; nothing is lost.)
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) opened(null);
    else send({ type: "subscribe" });
  });

  // --- clocks ---------------------------------------------------------------------------------

  function tick() {
    const now = Date.now();
    document.querySelectorAll('.card[data-state="pending"] .countdown').forEach((el) => {
      const left = Math.round((Date.parse(el.dataset.deadline) - now) / 1000);
      if (Number.isNaN(left)) return;
      const m = Math.floor(Math.max(left, 0) / 60);
      const s = String(Math.max(left, 0) % 60).padStart(2, "0");
      el.textContent = left > 0 ? m + ":" + s + " left" : "expiring…";
      el.classList.toggle("urgent", left <= 30);
    });
    document.querySelectorAll(".card .age").forEach((el) => {
      const age = Math.max(0, Math.round((now - Date.parse(el.getAttribute("datetime"))) / 1000));
      if (Number.isNaN(age)) return;
      el.textContent = age < 60 ? age + "s ago" : age < 3600 ? Math.floor(age / 60) + "m ago" : Math.floor(age / 3600) + "h ago";
    });
  }

  window.setInterval(tick, 1000);
  countPending();
  connect();
})();
