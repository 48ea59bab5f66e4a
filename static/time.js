// Every time on every page in the viewer's own zone and locale, never the server's UTC.
//
// The server writes <time datetime="…Z"> (approvals/templatetags/human.py `local`) in the
// zone of the `gh_tz` cookie this script sets, so pages without JavaScript are right from
// the second visit on; cards pushed over the socket are rendered in UTC, so each <time>
// that appears is rewritten here too. Every <time> gets the full moment as its tooltip.
"use strict";
(() => {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  if (/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone) && !document.cookie.split("; ").includes("gh_tz=" + zone)) {
    document.cookie = "gh_tz=" + zone + "; path=/; max-age=31536000; SameSite=Lax";
  }
  const STYLES = {
    datetime: { day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" },
    seconds: { day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" },
    date: { day: "numeric", month: "short", year: "numeric" },
    time: { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" },
  };
  const formats = {};
  function format(style, when) {
    const name = STYLES[style] ? style : "datetime";
    formats[name] = formats[name] || new Intl.DateTimeFormat(undefined, STYLES[name]);
    return formats[name].format(when);
  }

  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach((el) => {
      const when = new Date(el.getAttribute("datetime"));
      if (Number.isNaN(when.getTime())) return;
      if (el.classList.contains("local")) el.textContent = format(el.dataset.style, when);
      el.title = format("seconds", when);
    });
    root.querySelectorAll("[data-deadline]").forEach((el) => {
      const when = new Date(el.dataset.deadline);
      if (!Number.isNaN(when.getTime())) el.title = "Denied automatically at " + format("time", when);
    });
  }

  localise(document);
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) if (node instanceof Element) localise(node.parentElement || node);
    }
  }).observe(document.body, { childList: true, subtree: true });
})();
