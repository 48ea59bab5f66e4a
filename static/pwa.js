// Every page registers the service worker, which makes the dashboard an installable app
// and lets it show pushed asks (static/service-worker.js). Turning notifications on is
// the notifications page's job (static/push.js).
"use strict";
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/service-worker.js", { scope: "/" }).catch(() => {});
}
