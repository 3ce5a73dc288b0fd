// Live status: elements with data-poll are refreshed from their fragment URL.
// On a run page, the page reloads once the run ends, to show its final reports.
"use strict";

const TERMINAL = new Set(["finished", "error", "cancelled"]);

function poll(element) {
  const url = element.dataset.poll;
  const interval = Number(element.dataset.interval || 2000);
  const reloadWhenDone = element.dataset.reloadWhenDone === "1";
  const tick = async () => {
    try {
      const response = await fetch(url, { headers: { Accept: "text/html" } });
      if (response.ok) {
        element.innerHTML = await response.text();
        const marker = element.querySelector("[data-status]");
        if (reloadWhenDone && marker && TERMINAL.has(marker.dataset.status)) {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // The server may be restarting; try again on the next tick.
    }
    window.setTimeout(tick, interval);
  };
  window.setTimeout(tick, interval);
}

document.querySelectorAll("[data-poll]").forEach(poll);
