// Live status: elements with data-poll are refreshed from their fragment URL.
// On a run page, the page reloads once the run settles (ends, or awaits a GPU),
// to show its final reports. Copy buttons copy the text of the element they name;
// a folded stretch of an IR diff opens when its button is pressed.
"use strict";

const TERMINAL = new Set(["finished", "error", "cancelled", "awaiting_gpu"]);

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

document.querySelectorAll("button.copy").forEach((button) => {
  button.addEventListener("click", async () => {
    const source = document.getElementById(button.dataset.copy);
    if (!source || !navigator.clipboard) {
      return;
    }
    await navigator.clipboard.writeText(source.innerText);
    button.textContent = "Copied";
  });
});

document.querySelectorAll("tbody.fold button.unfold").forEach((button) => {
  button.addEventListener("click", () => {
    button.closest("tbody.fold").classList.add("open");
  });
});
