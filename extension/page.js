// snag capture: the extension's isolated world in each page, from
// document_start.
//
// The popup starts the picker here ("snag-pick") and closes, since a popup
// closes when the page is clicked. The picker outlines the element under
// the pointer; Esc cancels, a click picks. A panel then asks for a note, a
// kind and a severity, with Send and Cancel. Send gathers the page, the
// element's anchor and the console errors console.js recorded, hides the
// picker's own drawing, and hands it all to the service worker, which takes
// the screenshot and posts to snagd. Everything drawn lives in one shadow
// root, so the page's styles do not reach it.
(() => {
  "use strict";
  if (globalThis.__snagPage) return;
  globalThis.__snagPage = true;

  const MAX_ERRORS = 20;
  const ERROR_LEN = 500;
  const TEXT_LEN = 200;
  const KINDS = ["bug", "ux", "layout", "a11y", "perf", "feature", "chore", "note"];
  const SEVERITIES = ["critical", "high", "medium", "low"];

  // consoleErrors asks console.js (the page's world) for what it recorded.
  function consoleErrors() {
    let got = [];
    const take = (e) => {
      try {
        const list = JSON.parse(e.detail);
        if (Array.isArray(list)) got = list;
      } catch {
        // Not console.js's answer.
      }
    };
    document.addEventListener("snag:console", take);
    document.dispatchEvent(new CustomEvent("snag:ask-console"));
    document.removeEventListener("snag:console", take);
    return got
      .filter((s) => typeof s === "string" && s !== "")
      .slice(0, MAX_ERRORS)
      .map((s) => (s.length > ERROR_LEN ? s.slice(0, ERROR_LEN) : s));
  }

  // --- the anchor: a selector that finds the element again --------------

  // autoId reports whether an id looks made by a framework or a counter,
  // and so may differ on the next load.
  function autoId(id) {
    return (
      /\d{3,}/.test(id) ||
      /[:]/.test(id) ||
      /^\d/.test(id) ||
      /^(ember|ext-gen|yui|mui-|radix-|headlessui-|react-|rc-|__)/i.test(id) ||
      (/[0-9a-f]{8,}/i.test(id) && /\d/.test(id))
    );
  }

  function unique(sel, el) {
    try {
      const found = document.querySelectorAll(sel);
      return found.length === 1 && found[0] === el;
    } catch {
      return false;
    }
  }

  const quote = (v) => '"' + v.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';

  // step is one element's part of a path: its tag, and its place among
  // its siblings of that tag when it has any.
  function step(el) {
    const tag = el.localName;
    const parent = el.parentElement;
    if (!parent) return tag;
    const same = Array.from(parent.children).filter((c) => c.localName === tag);
    if (same.length === 1) return tag;
    return `${tag}:nth-of-type(${same.indexOf(el) + 1})`;
  }

  // selectorFor is, in order: #id when the id is unique and does not look
  // generated; a unique data-testid, data-test, name or aria-label; else
  // a tag:nth-of-type path up to the nearest ancestor with such an id (or
  // to body).
  function selectorFor(el) {
    if (el.id && !autoId(el.id)) {
      const sel = "#" + CSS.escape(el.id);
      if (unique(sel, el)) return sel;
    }
    for (const attr of ["data-testid", "data-test", "name", "aria-label"]) {
      const v = el.getAttribute(attr);
      if (v && v.length <= 100) {
        const sel = `${el.localName}[${attr}=${quote(v)}]`;
        if (unique(sel, el)) return sel;
      }
    }
    const parts = [];
    for (let cur = el; cur && cur !== document.documentElement; cur = cur.parentElement) {
      if (cur !== el && cur.id && !autoId(cur.id) && unique("#" + CSS.escape(cur.id), cur)) {
        parts.unshift("#" + CSS.escape(cur.id));
        break;
      }
      if (cur === document.body) {
        parts.unshift("body");
        break;
      }
      parts.unshift(step(cur));
    }
    const sel = parts.join(" > ");
    if (unique(sel, el)) return sel;
    // A path that cannot fail: every step from the root.
    const all = [];
    for (let cur = el; cur && cur !== document.documentElement; cur = cur.parentElement) all.unshift(step(cur));
    return ["html", ...all].join(" > ");
  }

  function anchorOf(el) {
    const r = el.getBoundingClientRect();
    let text = (el.innerText || el.textContent || el.getAttribute("aria-label") || el.getAttribute("alt") || "")
      .replace(/\s+/g, " ")
      .trim();
    if (text.length > TEXT_LEN) text = text.slice(0, TEXT_LEN);
    return {
      selector: selectorFor(el),
      text,
      box: { x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height },
    };
  }

  // --- what is drawn: one host element with a shadow root ---------------

  const STYLE = `
    :host { all: initial; }
    .outline { position: fixed; pointer-events: none; box-sizing: border-box;
      border: 2px solid #d81b60; background: rgba(216, 27, 96, 0.12); border-radius: 2px;
      transition: all 40ms linear; display: none; }
    .hint { position: fixed; left: 50%; top: 12px; transform: translateX(-50%); pointer-events: none;
      font: 13px/1.4 system-ui, sans-serif; color: #fff; background: #222; padding: 6px 12px;
      border-radius: 6px; box-shadow: 0 2px 8px rgba(0,0,0,.3); }
    .panel { position: fixed; right: 16px; bottom: 16px; width: 340px; pointer-events: auto;
      font: 14px/1.4 system-ui, sans-serif; color: #1b1b1b; background: #fff; border: 1px solid #888;
      border-radius: 8px; box-shadow: 0 6px 24px rgba(0,0,0,.3); padding: 14px 16px; box-sizing: border-box; }
    .panel h2 { font-size: 15px; margin: 0 0 4px; }
    .panel .what { font: 12px/1.3 ui-monospace, monospace; color: #444; word-break: break-all; margin: 0 0 10px; }
    .panel label { display: block; font-weight: 600; margin: 8px 0 4px; }
    .panel textarea, .panel select { width: 100%; box-sizing: border-box; font: inherit; color: inherit;
      background: #fff; border: 1px solid #767676; border-radius: 4px; padding: 6px; }
    .panel textarea { min-height: 84px; resize: vertical; }
    .panel .row { display: flex; gap: 10px; }
    .panel .row > div { flex: 1; }
    .panel .buttons { display: flex; gap: 8px; justify-content: flex-end; margin-top: 12px; }
    .panel button { font: inherit; padding: 6px 14px; border-radius: 4px; border: 1px solid #555;
      background: #f2f2f2; color: #1b1b1b; cursor: pointer; }
    .panel button.primary { background: #ad1457; border-color: #ad1457; color: #fff; }
    .panel button:disabled { opacity: .6; cursor: default; }
    .panel :focus-visible { outline: 3px solid #1a73e8; outline-offset: 1px; }
    .panel .status { margin: 10px 0 0; min-height: 1.4em; }
    .panel .status.error { color: #b00020; }
    .panel .keys { font-size: 12px; color: #555; margin: 8px 0 0; }
    @media (prefers-color-scheme: dark) {
      .panel { background: #202124; color: #e8eaed; border-color: #5f6368; }
      .panel .what, .panel .keys { color: #bdc1c6; }
      .panel textarea, .panel select { background: #303134; border-color: #9aa0a6; }
      .panel button { background: #303134; color: #e8eaed; border-color: #9aa0a6; }
      .panel .status.error { color: #f28b82; }
    }`;

  let host = null; // the element that holds the shadow root, while shown
  let root = null;

  function mount() {
    unmount();
    host = document.createElement("snag-capture");
    host.style.cssText =
      "all: initial; position: fixed; inset: 0; z-index: 2147483647; pointer-events: none; display: block;";
    root = host.attachShadow({ mode: "open" });
    const style = document.createElement("style");
    style.textContent = STYLE;
    root.append(style);
    document.documentElement.append(host);
  }

  function unmount() {
    if (host) host.remove();
    host = root = null;
  }

  // --- the picker -------------------------------------------------------

  let picking = null; // the picker's listeners while it runs

  function startPicker() {
    if (!document.documentElement) return false;
    stopPicker();
    mount();
    const outline = document.createElement("div");
    outline.className = "outline";
    const hint = document.createElement("div");
    hint.className = "hint";
    hint.setAttribute("role", "status");
    hint.textContent = "snag: click the element to capture \u00b7 Esc cancels";
    root.append(outline, hint);
    let current = null;

    const show = (el) => {
      current = el;
      const r = el.getBoundingClientRect();
      Object.assign(outline.style, {
        display: "block",
        left: r.left + "px",
        top: r.top + "px",
        width: Math.max(r.width, 2) + "px",
        height: Math.max(r.height, 2) + "px",
      });
    };
    const target = (e) => {
      const el = document.elementFromPoint(e.clientX, e.clientY);
      return el && el !== host && el !== document.documentElement ? el : null;
    };
    const swallow = (e) => {
      e.preventDefault();
      e.stopImmediatePropagation();
    };
    const on = {
      mousemove: (e) => {
        const el = target(e);
        if (el && el !== current) show(el);
      },
      scroll: () => current && show(current),
      mousedown: swallow,
      mouseup: swallow,
      pointerdown: swallow,
      pointerup: swallow,
      auxclick: swallow,
      click: (e) => {
        swallow(e);
        const el = target(e) || current;
        if (!el) return;
        stopPicker();
        openPanel(el);
      },
      keydown: (e) => {
        if (e.key === "Escape") {
          swallow(e);
          stopPicker();
          unmount();
        }
      },
    };
    for (const [type, fn] of Object.entries(on)) window.addEventListener(type, fn, true);
    picking = on;
    return true;
  }

  function stopPicker() {
    if (!picking) return;
    for (const [type, fn] of Object.entries(picking)) window.removeEventListener(type, fn, true);
    picking = null;
  }

  // --- the panel --------------------------------------------------------

  function el(tag, props = {}, ...children) {
    const e = document.createElement(tag);
    Object.assign(e, props);
    e.append(...children);
    return e;
  }

  function openPanel(target) {
    mount();
    const anchor = anchorOf(target);
    const outline = el("div", { className: "outline" });
    const r = target.getBoundingClientRect();
    Object.assign(outline.style, {
      display: "block",
      left: r.left + "px",
      top: r.top + "px",
      width: Math.max(r.width, 2) + "px",
      height: Math.max(r.height, 2) + "px",
    });

    const note = el("textarea", { id: "snag-note", placeholder: "What is wrong here?" });
    const kind = el("select", { id: "snag-kind" }, ...KINDS.map((k) => el("option", { value: k, textContent: k })));
    const severity = el(
      "select",
      { id: "snag-severity" },
      ...SEVERITIES.map((s) => el("option", { value: s, textContent: s, selected: s === "medium" })),
    );
    const send = el("button", { type: "button", className: "primary", id: "snag-send", textContent: "Send" });
    const cancel = el("button", { type: "button", id: "snag-cancel", textContent: "Cancel" });
    const status = el("p", { className: "status", id: "snag-status" });
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    const title = el("h2", { id: "snag-title", textContent: "Send to snag" });
    const panel = el(
      "div",
      { className: "panel" },
      title,
      el("p", { className: "what", textContent: anchor.selector }),
      el("label", { htmlFor: "snag-note", textContent: "Note" }),
      note,
      el(
        "div",
        { className: "row" },
        el("div", {}, el("label", { htmlFor: "snag-kind", textContent: "Kind" }), kind),
        el("div", {}, el("label", { htmlFor: "snag-severity", textContent: "Severity" }), severity),
      ),
      el("div", { className: "buttons" }, cancel, send),
      status,
      el("p", { className: "keys", textContent: "Ctrl+Enter sends \u00b7 Esc cancels" }),
    );
    panel.setAttribute("role", "dialog");
    panel.setAttribute("aria-modal", "true");
    panel.setAttribute("aria-labelledby", "snag-title");
    root.append(outline, panel);

    let done = false;
    const close = () => {
      window.removeEventListener("keydown", keys, true);
      unmount();
    };
    const keys = (e) => {
      // Keys go to the panel, not the page, while it is open.
      if (!host || !e.composedPath().includes(host)) {
        if (e.key === "Escape") {
          e.preventDefault();
          close();
        }
        return;
      }
      e.stopPropagation();
      if (e.key === "Escape") {
        e.preventDefault();
        close();
      } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !send.disabled && !done) {
        e.preventDefault();
        submit();
      } else if (e.key === "Tab") {
        // Focus stays in the panel.
        const stops = [note, kind, severity, cancel, send].filter((x) => !x.disabled);
        const at = stops.indexOf(root.activeElement);
        if (at >= 0 && (e.shiftKey ? at === 0 : at === stops.length - 1)) {
          e.preventDefault();
          stops[e.shiftKey ? stops.length - 1 : 0].focus();
        }
      }
    };
    window.addEventListener("keydown", keys, true);
    cancel.addEventListener("click", close);

    async function submit() {
      send.disabled = true;
      status.className = "status";
      status.textContent = "Sending\u2026";
      const capture = {
        url: location.href,
        title: document.title,
        viewport: { width: window.innerWidth, height: window.innerHeight, scale: window.devicePixelRatio },
        user_agent: navigator.userAgent,
        anchor,
        scroll: { x: window.scrollX, y: window.scrollY },
        console_errors: consoleErrors(),
        note: note.value.trim(),
        kind: kind.value,
        severity: severity.value,
      };
      // The screenshot is of the page as the person saw it, without the
      // panel and the outline: hide them until it is taken.
      host.style.visibility = "hidden";
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 30))));
      let answer;
      try {
        answer = await chrome.runtime.sendMessage({ type: "snag-capture", capture });
      } catch (err) {
        answer = { error: "The extension could not send it: " + err.message + " (reload the page and try again)" };
      }
      if (host) host.style.visibility = "visible";
      if (answer && answer.ok) {
        done = true;
        status.textContent = `Sent: ${answer.key} is in snag's inbox.`;
        status.dataset.key = answer.key;
        cancel.textContent = "Close";
        send.hidden = true;
        cancel.focus();
      } else {
        status.className = "status error";
        status.textContent = (answer && answer.error) || "The extension could not send it.";
        send.disabled = false;
        send.focus();
      }
    }
    send.addEventListener("click", submit);
    note.focus();
  }

  chrome.runtime.onMessage.addListener((msg, sender, reply) => {
    if (msg && msg.type === "snag-pick" && sender.id === chrome.runtime.id) {
      reply({ ok: startPicker() });
    }
  });
})();
