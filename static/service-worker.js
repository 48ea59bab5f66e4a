// The dashboard's service worker: shows pushed asks as notifications with buttons.
//
// Payload (relay/push/notify.py, docs/API.md): {"type": "ask", request_id, tool_name,
// title, summary, body, actions: [{action: "allow"|"deny", token}], ...} or
// {"type": "finished", request_id, summary} once the ask is over (it replaces the ask's
// notification, which shares its tag). A button posts its one-time token to
// /api/v1/push-actions/{token}: no session is needed, the token is the authority.
// Served from /service-worker.js so its scope is the whole site.
"use strict";

const ACTION_PATH = "/api/v1/push-actions/";
const LABELS = { allow: "Allow", deny: "Deny", open: "Open" };

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let payload = null;
  try {
    payload = event.data ? event.data.json() : null;
  } catch (error) {
    payload = null;
  }
  event.waitUntil(showPush(payload));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(handleClick(event.notification, event.action));
});

function pagePath(requestId) {
  return /^[0-9a-f-]{36}$/.test(requestId || "") ? `/requests/${requestId}/` : "/";
}

async function showPush(payload) {
  if (!payload || typeof payload !== "object") {
    return self.registration.showNotification("Gatehouse", { body: "Something needs your attention.", tag: "gatehouse" });
  }
  const tag = String(payload.request_id || "gatehouse");
  if (payload.type === "finished") {
    return self.registration.showNotification("Gatehouse", {
      body: String(payload.summary || "This ask is over."),
      tag,
      silent: true,
      data: { request_id: tag },
    });
  }
  const tokens = {};
  for (const item of payload.actions || []) {
    if ((item.action === "allow" || item.action === "deny") && typeof item.token === "string") {
      tokens[item.action] = item.token;
    }
  }
  // Allow first when offered, then Deny and Open; a platform showing fewer buttons drops
  // Open, and a tap on the notification itself opens the request too.
  const names = [...(tokens.allow ? ["allow"] : []), ...(tokens.deny ? ["deny"] : []), "open"];
  const limit = self.Notification && Notification.maxActions ? Notification.maxActions : names.length;
  return self.registration.showNotification(String(payload.title || "Gatehouse"), {
    body: String(payload.body || payload.summary || ""),
    tag,
    renotify: true,
    requireInteraction: true,
    data: { request_id: tag, tokens },
    actions: names.slice(0, limit).map((action) => ({ action, title: LABELS[action] })),
  });
}

async function decide(token, action) {
  let response;
  try {
    response = await fetch(ACTION_PATH + encodeURIComponent(token), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ behavior: action }),
      credentials: "omit",
    });
  } catch (error) {
    return { status: 0, message: "Gatehouse could not be reached; open the request to decide." };
  }
  let body = {};
  try {
    body = await response.json();
  } catch (error) {
    body = {};
  }
  const message = response.ok ? body.message : (body.error && body.error.message) || `Gatehouse answered ${response.status}.`;
  return { status: response.status, message: String(message || "") };
}

async function openPage(path) {
  const url = new URL(path, self.location.origin).href;
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const client of windows) {
    if (client.url === url && "focus" in client) return client.focus();
  }
  return self.clients.openWindow(url);
}

async function handleClick(notification, action) {
  const data = notification.data || {};
  const token = data.tokens ? data.tokens[action] : undefined;
  if ((action === "allow" || action === "deny") && token) {
    const result = await decide(token, action);
    await self.registration.showNotification("Gatehouse", {
      body: result.message,
      tag: data.request_id,
      silent: true,
      data: { request_id: data.request_id },
    });
    return result;
  }
  await openPage(pagePath(data.request_id));
  return { status: 0, message: "opened" };
}

// For the browser tests, which cannot tap a notification: the same functions the events call.
self.gatehouse = { showPush, handleClick };
