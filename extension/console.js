// snag capture: the page's own world (MAIN), from document_start.
//
// It records what the DevTools console would show as errors: console.error
// calls, uncaught exceptions and unhandled promise rejections, the first 20
// of them, each cut at 500 characters. page.js, in the extension's isolated
// world, asks for them when the person sends a capture: it dispatches
// "snag:ask-console" on the document and this script answers at once with
// "snag:console", whose detail is the list as JSON (a string, which crosses
// between the worlds as it is). The page can read and fake both events; it
// can as well fake its own errors, so nothing is lost by that.
(() => {
  "use strict";
  if (window.__snagConsole) return;
  Object.defineProperty(window, "__snagConsole", { value: true });

  const MAX = 20;
  const LEN = 500;
  const entries = [];

  const clip = (s) => (s.length > LEN ? s.slice(0, LEN - 1) + "\u2026" : s);

  // text renders one value as the console shows it, without a stack.
  const text = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return String(v);
    if (v === null || typeof v !== "object") return String(v);
    try {
      return JSON.stringify(v);
    } catch {
      return Object.prototype.toString.call(v);
    }
  };

  // format applies %s %d %i %f %o %O %c of a first string argument.
  const format = (args) => {
    if (args.length === 0) return "";
    if (typeof args[0] !== "string" || !args[0].includes("%")) return args.map(text).join(" ");
    let rest = args.slice(1);
    const head = args[0].replace(/%([sdifoOc%])/g, (m, c) => {
      if (c === "%") return "%";
      if (rest.length === 0) return m;
      const v = rest.shift();
      switch (c) {
        case "d":
        case "i":
          return String(parseInt(v, 10));
        case "f":
          return String(parseFloat(v));
        case "c":
          return "";
        default:
          return text(v);
      }
    });
    return [head, ...rest.map(text)].join(" ");
  };

  const record = (s) => {
    if (entries.length < MAX && s) entries.push(clip(s));
  };

  const original = console.error;
  console.error = function (...args) {
    try {
      record(format(args));
    } catch {
      // A value that cannot be shown is not worth breaking the page for.
    }
    return original.apply(this, args);
  };

  window.addEventListener(
    "error",
    (e) => {
      if (!(e instanceof ErrorEvent)) return; // a resource that failed to load
      record(e.error instanceof Error ? "Uncaught " + String(e.error) : e.message || "Uncaught error");
    },
    true,
  );
  window.addEventListener("unhandledrejection", (e) => {
    record("Uncaught (in promise) " + text(e.reason));
  });

  document.addEventListener("snag:ask-console", () => {
    document.dispatchEvent(new CustomEvent("snag:console", { detail: JSON.stringify(entries) }));
  });
})();
