// snag board: sends the page's forms with its CSRF token and, on pages that
// follow the daemon, refreshes what changed when /events says something did.
// Without this script every page still reads, and every form still posts.
"use strict";
(() => {
  const csrf = document.querySelector('meta[name="snag-csrf"]')?.content || "";
  const flash = document.getElementById("flash");
  const live = document.getElementById("live");

  function say(text, error) {
    if (!flash) return;
    flash.textContent = text;
    flash.classList.toggle("error", !!error);
  }

  // Forms that change something go by fetch, so the page stays where it is
  // and the change shows through the same refresh as everyone else's.
  document.addEventListener("submit", async (e) => {
    const form = e.target;
    // getAttribute, not form.action: a control named "action" would shadow it.
    if (!(form instanceof HTMLFormElement) || (form.getAttribute("method") || "").toLowerCase() !== "post") return;
    e.preventDefault();
    const body = new URLSearchParams(new FormData(form, e.submitter));
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    try {
      const resp = await fetch(form.getAttribute("action"), {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-Snag-CSRF": csrf },
      });
      let out = {};
      try { out = await resp.json(); } catch (_) { /* not JSON */ }
      if (resp.status === 401) { location.reload(); return; }
      if (out.redirect) { location.assign(out.redirect); return; }
      say(out.message || (resp.ok ? "done" : "refused (" + resp.status + ")"), !resp.ok);
      await refresh();
    } catch (err) {
      say("snagd did not answer: is it running? (" + err + ")", true);
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  });

  // A picture wider than its frame (the decision graph) says it scrolls.
  function scrollHints() {
    const pic = document.getElementById("graph-picture");
    const hint = document.getElementById("graph-hint");
    if (pic && hint) hint.hidden = pic.scrollWidth <= pic.clientWidth + 1;
  }
  scrollHints();
  addEventListener("resize", scrollHints);

  if (!document.body.dataset.follow) return;

  // refresh fetches this page again and swaps each [data-live] part whose
  // markup changed, keeping what the person typed, ticked and focused.
  let running = false, again = false;
  async function refresh() {
    if (running) { again = true; return; }
    running = true;
    try {
      const resp = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (resp.status === 401) { location.reload(); return; }
      if (!resp.ok) return;
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      for (const el of document.querySelectorAll("[data-live][id]")) {
        const fresh = doc.getElementById(el.id);
        if (!fresh) continue;
        // A part the person opened (a form, an output) stays open, and
        // being open is not a change.
        for (const d of el.querySelectorAll("details[id]")) {
          const f = fresh.querySelector("#" + CSS.escape(d.id));
          if (f) f.open = d.open;
        }
        const hint = el.querySelector("#graph-hint"), freshHint = fresh.querySelector("#graph-hint");
        if (hint && freshHint) freshHint.hidden = hint.hidden; // the script's, not a change
        if (fresh.innerHTML !== el.innerHTML) { swap(el, fresh); scrollHints(); }
      }
      document.title = doc.title;
    } finally {
      running = false;
      if (again) { again = false; refresh(); }
    }
  }

  function swap(el, fresh) {
    const kept = new Map();
    for (const input of el.querySelectorAll("input, select, textarea")) {
      const key = input.id || (input.name + "=" + input.value);
      kept.set(key, input.type === "checkbox" || input.type === "radio" ? input.checked : input.value);
    }
    const focused = el.contains(document.activeElement) ? finder(el, document.activeElement) : null;
    // Parts that scroll (the graph's picture) keep where they were scrolled to.
    const scrolled = [...el.querySelectorAll("[id]")].filter((n) => n.scrollLeft || n.scrollTop)
      .map((n) => [n.id, n.scrollLeft, n.scrollTop]);
    el.innerHTML = fresh.innerHTML;
    for (const input of el.querySelectorAll("input, select, textarea")) {
      const key = input.id || (input.name + "=" + input.value);
      if (!kept.has(key) || input.type === "hidden") continue;
      if (input.type === "checkbox" || input.type === "radio") input.checked = kept.get(key);
      else input.value = kept.get(key);
    }
    for (const [id, left, top] of scrolled) {
      const n = document.getElementById(id);
      if (n) { n.scrollLeft = left; n.scrollTop = top; }
    }
    focused?.()?.focus({ preventScroll: true });
  }

  // finder returns how to find the element again once its part's markup
  // is replaced: by its id, else (a link of the graph has none) as the
  // same link, the nth to the same address.
  function finder(part, el) {
    if (el.id) return () => document.getElementById(el.id);
    const href = el.getAttribute("href");
    if (!href) return null;
    const sel = "a[href=\"" + CSS.escape(href) + "\"]";
    const nth = [...part.querySelectorAll(sel)].indexOf(el);
    return () => part.querySelectorAll(sel)[nth];
  }

  let timer = 0;
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 60);
  }

  function follow() {
    const es = new EventSource("/events");
    es.onopen = () => { live.textContent = "live"; live.classList.add("on"); soon(); };
    es.onerror = () => { live.textContent = "reconnecting…"; live.classList.remove("on"); };
    // Another clone's changes come as the same kinds with source "team";
    // "clone" (a clone joined or was ended) and "team" (the listener
    // missed some and resynced) are the team's alone.
    for (const kind of ["task", "lease", "session", "rescan", "verify", "problem", "resync", "message", "audit", "files", "report", "handoff", "plan", "note", "clone", "team"]) {
      es.addEventListener(kind, soon);
    }
    es.onmessage = soon;
  }
  follow();
})();
