// The verify page: sends the picked or dropped file to POST /verify, which
// runs the same check as `grove moot verify`, and shows the verdict.
"use strict";
(function () {
  const form = document.getElementById("verify-form");
  const input = document.getElementById("file");
  const out = document.getElementById("verdict");

  async function check(file) {
    out.textContent = "Checking " + file.name + "…";
    try {
      const r = await fetch("/verify?name=" + encodeURIComponent(file.name), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: await file.text(),
      });
      out.innerHTML = await r.text();
    } catch (e) {
      out.textContent = "The check could not run: " + e;
    }
  }

  input.addEventListener("change", () => { if (input.files[0]) check(input.files[0]); });
  form.addEventListener("submit", (e) => { e.preventDefault(); if (input.files[0]) check(input.files[0]); });
  for (const name of ["dragenter", "dragover"]) {
    form.addEventListener(name, (e) => { e.preventDefault(); form.classList.add("over"); });
  }
  form.addEventListener("dragleave", () => form.classList.remove("over"));
  form.addEventListener("drop", (e) => {
    e.preventDefault();
    form.classList.remove("over");
    const file = e.dataTransfer.files[0];
    if (file) check(file);
  });
})();
