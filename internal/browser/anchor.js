// anchor.js finds the element a capture points at and says where it is. It
// runs in an isolated world of the page's main frame (Page.createIsolatedWorld),
// so the page's own scripts cannot change what querySelector or innerText
// answer. Go calls it as (function ...)(selector, text) and reads the JSON it
// returns; the rules are in the package comment of browser ("# Capture").
async function (sel, text) {
  "use strict";

  // norm is the text as the rules compare it: runs of white space are one
  // space, and the ends are trimmed.
  const norm = (s) => String(s || "").replace(/\s+/g, " ").trim();

  // unique reports whether selector s matches exactly one element.
  const unique = (s) => {
    try {
      return document.querySelectorAll(s).length === 1;
    } catch (e) {
      return false;
    }
  };

  // generated reports whether an id looks made by a framework or a build,
  // so it may change when the page changes: it has a colon or white space,
  // is long, starts with a digit, has three digits in a row, has a part of
  // six or more characters with two digits in it (a hash), or is a known
  // framework's numbered id (ember12, react-aria-3, mui-7, :r1:).
  const generated = (id) =>
    id.length > 40 ||
    /[:\s]/.test(id) ||
    /^\d/.test(id) ||
    /\d{3}/.test(id) ||
    id.split(/[-_.]/).some((p) => p.length >= 6 && /[a-z]/i.test(p) && (p.match(/\d/g) || []).length >= 2) ||
    /^(ember\d|(react|aria|mui|radix|headlessui|downshift|rc|ext-gen|gwt|yui|mat|cdk|ng|__bvid)[-_].*\d)/i.test(id);

  // quoted is v as a CSS string.
  const quoted = (v) => '"' + v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\a ") + '"';

  // visible reports whether e is drawn with a size.
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    return typeof e.checkVisibility !== "function" || e.checkVisibility({ visibilityProperty: true, opacityProperty: true });
  };

  // byText returns the smallest visible element whose text equals t, else
  // the smallest whose text contains it. A text that ends in "…" was cut
  // when it was stored: the rest of it is looked for as a part.
  const byText = (t) => {
    t = norm(t);
    let exactAllowed = true;
    if (t.endsWith("…")) {
      t = norm(t.slice(0, -1));
      exactAllowed = false;
    }
    if (!t) return null;
    let best = null;
    let bestArea = Infinity;
    let bestExact = false;
    for (const e of document.querySelectorAll("body, body *")) {
      const it = norm(e.innerText);
      if (!it.includes(t) || !visible(e)) continue;
      const exact = exactAllowed && it === t;
      if (bestExact && !exact) continue;
      const r = e.getBoundingClientRect();
      const area = r.width * r.height;
      if ((exact && !bestExact) || area < bestArea || (area === bestArea && best && best.contains(e))) {
        best = e;
        bestArea = area;
        bestExact = exact;
      }
    }
    return best;
  };

  // step is e's part of a path: its tag, with :nth-of-type when a sibling
  // has the same tag.
  const step = (e) => {
    const tag = CSS.escape(e.localName);
    if (!e.parentElement) return tag;
    let n = 0;
    let same = 0;
    for (const s of e.parentElement.children) {
      if (s.localName === e.localName) {
        same++;
        if (s === e) n = same;
      }
    }
    return same > 1 ? tag + ":nth-of-type(" + n + ")" : tag;
  };

  // selectorOf builds a selector for e that should still find it after
  // small changes to the page: its id, else a telling attribute, else a
  // short path from the nearest ancestor with an id (or from body).
  const selectorOf = (e) => {
    if (e.id && !generated(e.id) && unique("#" + CSS.escape(e.id))) return "#" + CSS.escape(e.id);
    for (const a of ["data-testid", "name", "aria-label"]) {
      const v = e.getAttribute(a);
      if (!v || v.length > 100) continue;
      const s = "[" + a + "=" + quoted(v) + "]";
      if (unique(s)) return s;
      if (unique(CSS.escape(e.localName) + s)) return CSS.escape(e.localName) + s;
    }
    if (e === document.documentElement) return "html";
    if (e === document.body) return "body";
    const steps = [];
    let p = e;
    for (; p && p !== document.body && p !== document.documentElement; p = p.parentElement) {
      if (p !== e && p.id && !generated(p.id) && unique("#" + CSS.escape(p.id))) {
        steps.unshift("#" + CSS.escape(p.id));
        return steps.join(" > ");
      }
      steps.unshift(step(p));
    }
    steps.unshift(p === document.body ? "body" : "html");
    return steps.join(" > ");
  };

  let el = null;
  let by = "";
  if (sel) {
    try {
      el = document.querySelector(sel);
    } catch (e) {
      // A selector that is not one may still have a text to fall back on.
      if (!text) return { error: "not a CSS selector (" + e.message + ")" };
    }
    if (el) by = "selector";
  }
  if (!el && text) {
    el = byText(text);
    if (el) by = "text";
  }
  if (!el) return { found: false };

  let r = el.getBoundingClientRect();
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) {
    el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
    // Let the page draw the scrolled frame before the screenshot; a page
    // that draws no frame gets a tenth of a second.
    await Promise.race([
      new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))),
      new Promise((done) => setTimeout(done, 100)),
    ]);
    r = el.getBoundingClientRect();
  }
  let selector = sel;
  if (by === "text") {
    selector = selectorOf(el);
    if (document.querySelector(selector) !== el) return { error: "the selector built for the element, " + selector + ", finds another one" };
  }
  return {
    found: true,
    by: by,
    selector: selector,
    text: norm(el.innerText).slice(0, 1000),
    x: r.left + scrollX,
    y: r.top + scrollY,
    width: r.width,
    height: r.height,
  };
}
