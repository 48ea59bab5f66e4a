// Rules and agents pages: ask before a destructive POST (delete a rule, revoke an agent).
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault();
  }
});
