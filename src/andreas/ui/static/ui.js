// ANDREAS dashboard: reload the parts of a page that change. Every element with
// data-refresh="URL" gets URL's HTML (a fragment of the page) every data-every milliseconds
// (default 3000). No framework, nothing loaded from elsewhere.
"use strict";
document.querySelectorAll("[data-refresh]").forEach((el) => {
  const every = Number(el.dataset.every || 3000);
  let busy = false;
  const refresh = async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const r = await fetch(el.dataset.refresh, { credentials: "same-origin" });
      if (r.redirected) { window.location.reload(); return; } // signed out: show sign-in
      if (r.ok) {
        const html = await r.text();
        if (html !== el.innerHTML) el.innerHTML = html;
        el.dataset.refreshed = String(Date.now());
      }
    } catch (e) {
      // the service is away for a moment: try again next time
    } finally {
      busy = false;
    }
  };
  setInterval(refresh, every);
});
