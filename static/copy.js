// One-time tokens and codes: a Copy button beside each (agents and profile pages).
//
// <button data-copy="ID"> copies the text of the element with that id. The Clipboard API
// needs a secure context (HTTPS or localhost); on plain HTTP across a LAN the text is
// selected and copied the old way, and if even that fails it stays selected for a
// long-press. The button is hidden until this script runs, so no page offers a dead one.
"use strict";
(() => {
  function select(target) {
    const range = document.createRange();
    range.selectNodeContents(target);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  async function copy(button) {
    const target = document.getElementById(button.dataset.copy);
    const status = document.getElementById(button.dataset.copy + "-copied");
    if (!target) return;
    const text = target.textContent.trim();
    let done = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(text);
        done = true;
      }
    } catch (e) {
      done = false;
    }
    if (!done) {
      select(target);
      try { done = document.execCommand("copy"); } catch (e) { done = false; }
    }
    if (status) status.textContent = done ? "Copied." : "Selected: copy it with your device's Copy.";
  }

  document.querySelectorAll("button[data-copy]").forEach((button) => {
    button.hidden = false;
    button.addEventListener("click", () => copy(button));
  });
})();
