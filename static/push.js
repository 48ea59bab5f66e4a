// The notifications page: turn Web Push on or off for this browser.
//
// On: ask the browser's permission, subscribe with the server's VAPID key
// (GET /api/v1/push/vapid-public-key) and hand the subscription to the server
// (POST /api/v1/push-subscriptions, as the logged-in person). Off: unsubscribe and
// DELETE it. The id the server gave is kept in localStorage to delete it later.
"use strict";
(() => {
  const panel = document.getElementById("push");
  if (!panel) return;
  const state = document.getElementById("push-state");
  const enable = document.getElementById("push-enable");
  const disable = document.getElementById("push-disable");
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrf = csrfMeta ? csrfMeta.content : "";
  const KEY = "gatehouse.push.subscription";

  function say(text) {
    state.textContent = text;
  }

  function keyBytes(base64url) {
    const padded = (base64url + "===".slice((base64url.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  async function registration() {
    await navigator.serviceWorker.register("/service-worker.js", { scope: "/" });
    return navigator.serviceWorker.ready;
  }

  async function refresh() {
    const current = await (await registration()).pushManager.getSubscription();
    const on = Boolean(current) && Notification.permission === "granted";
    enable.hidden = on;
    disable.hidden = !on;
    if (Notification.permission === "denied") {
      say("Notifications are blocked for this site in the browser's settings.");
    } else {
      say(on ? "On: asks you may decide arrive on this device." : "Off on this device.");
    }
  }

  async function turnOn() {
    enable.disabled = true;
    try {
      if ((await Notification.requestPermission()) !== "granted") {
        say("The browser did not allow notifications, so nothing changed.");
        return;
      }
      const key = (await (await fetch("/api/v1/push/vapid-public-key")).json()).public_key;
      const reg = await registration();
      const subscription = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
      const response = await fetch("/api/v1/push-subscriptions", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify(subscription.toJSON()),
      });
      const body = await response.json();
      if (response.status !== 201) {
        await subscription.unsubscribe();
        say((body.error && body.error.message) || `The server refused this browser (${response.status}).`);
        return;
      }
      localStorage.setItem(KEY, String(body.id));
      await refresh();
    } catch (error) {
      say(`This browser could not subscribe: ${error.message || error}`);
    } finally {
      enable.disabled = false;
    }
  }

  async function turnOff() {
    const current = await (await registration()).pushManager.getSubscription();
    if (current) await current.unsubscribe();
    const id = localStorage.getItem(KEY);
    if (id) {
      await fetch(`/api/v1/push-subscriptions/${encodeURIComponent(id)}`, {
        method: "DELETE",
        headers: { "X-CSRFToken": csrf },
      });
      localStorage.removeItem(KEY);
    }
    await refresh();
  }

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    say("This browser cannot receive push notifications; try ntfy below, or add Gatehouse to the home screen first.");
    enable.disabled = true;
    return;
  }
  enable.addEventListener("click", turnOn);
  disable.addEventListener("click", turnOff);
  refresh().catch(() => say("Off on this device."));
})();
