// pylog console: live fragments. Every element with data-refresh="URL" is replaced by the
// HTML the console renders at URL, every data-interval milliseconds (and at once when
// data-load="now"). The server escapes everything it renders; this script adds no markup
// of its own. No library, no build step.
"use strict";
(function () {
  function refresh(el) {
    fetch(el.dataset.refresh, {credentials: "same-origin", headers: {"X-Requested-With": "console"}})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        el.replaceChildren.apply(el, Array.from(doc.body.childNodes));
        el.dataset.refreshed = String(Number(el.dataset.refreshed || "0") + 1);
      })
      .catch(function () { el.classList.add("stale"); });
  }
  function start() {
    document.querySelectorAll("[data-refresh]").forEach(function (el) {
      var every = Math.max(Number(el.dataset.interval) || 5000, 500);
      if (el.dataset.load === "now") { refresh(el); }
      setInterval(function () { if (!document.hidden) { refresh(el); } }, every);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
