// Rules page: show what a draft rule (or a suggestion) would change before it is saved.
// The server renders the answer (templates/approvals/_what_if.html, every value escaped);
// this only posts the form the button belongs to and puts that fragment under it.
"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target instanceof Element ? event.target.closest("button[data-what-if]") : null;
  if (!button || !button.form) {
    return;
  }
  const target = document.getElementById(button.dataset.whatIf);
  if (!target) {
    return;
  }
  target.textContent = "Replaying recorded calls…";
  button.disabled = true;
  try {
    const response = await fetch(button.dataset.url, {
      method: "POST",
      body: new FormData(button.form),
      credentials: "same-origin",
      headers: { "X-Requested-With": "fetch" },
    });
    target.innerHTML = await response.text();
  } catch (error) {
    target.textContent = "The what-if could not be run: " + String(error);
  } finally {
    button.disabled = false;
  }
});
