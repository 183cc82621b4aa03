// The moot page, live: reads the node's event stream (NDJSON from
// /v1/events?moot=ID, with fetch and a streaming reader; no polling) and,
// on each turn, fetches that turn's HTML from /moots/ID/turns/N (the
// server renders turns in one place) and puts it in speaking order.
"use strict";
(function () {
  const root = document.querySelector("[data-moot]");
  if (!root) return;
  const id = root.dataset.moot;
  const turns = document.getElementById("turns");
  const base = "/moots/" + encodeURIComponent(id);

  function stateNode() { return document.getElementById("moot-state"); }
  function finished() { return stateNode().dataset.state === "finished"; }

  async function fragment(path) {
    const r = await fetch(base + path, { headers: { Accept: "text/html" } });
    if (!r.ok) throw new Error(path + ": " + r.status);
    return r.text();
  }

  function place(html, index) {
    if (document.getElementById("t" + index)) return;
    const holder = document.createElement("div");
    holder.innerHTML = html;
    const node = holder.firstElementChild;
    if (!node) return;
    node.classList.add("new");
    const after = Array.from(turns.children).find(
      (t) => Number(t.dataset.index) > index);
    turns.insertBefore(node, after || null);
  }

  // Brings the state box up to date, then fetches every turn not yet shown.
  let catching = Promise.resolve();
  function catchUp() {
    catching = catching.then(async () => {
      const holder = document.createElement("div");
      holder.innerHTML = await fragment("/state");
      const fresh = holder.firstElementChild;
      stateNode().replaceWith(fresh);
      const count = Number(fresh.dataset.turns);
      for (let i = 0; i < count; i++) {
        if (!document.getElementById("t" + i)) place(await fragment("/turns/" + i), i);
      }
    }).catch((e) => console.warn("moot page:", e));
    return catching;
  }

  function handle(event) {
    if (event.moot !== id) return;
    if (event.event === "moot_turn") {
      const i = Number(event.turn);
      catching = catching.then(async () => {
        if (!document.getElementById("t" + i)) place(await fragment("/turns/" + i), i);
      }).catch((e) => console.warn("moot page:", e));
    }
    catchUp();
  }

  async function follow() {
    const r = await fetch("/v1/events?moot=" + encodeURIComponent(id));
    if (!r.ok || !r.body) throw new Error("event stream: " + r.status);
    // Turns that landed between the page and the stream.
    catchUp();
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line) continue;
        let event = null;
        try { event = JSON.parse(line); } catch (e) { console.warn("moot page: bad event", e); }
        if (event) handle(event);
        if (event && event.moot === id && event.event === "moot_finished") {
          // Nothing more will come: close the stream once the page has
          // caught up.
          await catching;
          await reader.cancel();
          return;
        }
      }
    }
  }

  async function live() {
    let wait = 1000;
    while (!finished()) {
      try { await follow(); wait = 1000; } catch (e) { console.warn(e); }
      await catching;
      if (finished()) break;
      // The stream ended (the node restarted?): reconnect, backing off.
      await new Promise((res) => setTimeout(res, wait));
      wait = Math.min(wait * 2, 30000);
    }
  }
  // Escape closes an open proof panel, back to its turn.
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    const open = document.querySelector("section.proof:target a.close");
    if (open) location.hash = open.getAttribute("href");
  });
  if (!finished()) live();
})();
