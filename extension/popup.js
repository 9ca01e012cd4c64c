// snag capture: the popup.
//
// Unpaired, it asks for the line snag pair printed ("127.0.0.1:7654
// K7M-2QX"), sends the code to that snagd's POST /pair and keeps the
// capture credential it gets back in chrome.storage.local. Paired, its
// button starts the picker in the page's tab and closes the popup (which
// the page's first click would close anyway); "Forget this snagd" drops
// the credential here (snag pair --revoke revokes it at snagd).

"use strict";

const $ = (id) => document.getElementById(id);

function say(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

// parseLine reads "ADDRESS CODE". Only snagd's own loopback addresses are
// taken: the credential must never go anywhere else.
function parseLine(line) {
  const parts = line.trim().split(/\s+/);
  if (parts.length < 2) {
    throw new Error("Type the whole line snag pair printed: the address, a space, and the code.");
  }
  const address = parts[0].replace(/^https?:\/\//, "").replace(/\/$/, "");
  const m = /^(127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})$/.exec(address);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
    throw new Error(`${address} is not snagd's address: it is 127.0.0.1 and a port, as snag pair prints it.`);
  }
  return { address, code: parts.slice(1).join("") };
}

async function pair(line) {
  const { address, code } = parseLine(line);
  let resp;
  try {
    resp = await fetch(`http://${address}/pair`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code }),
    });
  } catch {
    throw new Error(`No snagd answers at ${address}: is it running? (snag daemon status)`);
  }
  const body = await resp.json().catch(() => ({}));
  if (resp.status !== 201) {
    throw new Error(body.message || `snagd answered ${resp.status}`);
  }
  await chrome.storage.local.set({ snagd: address, credential: body.credential, project: body.project });
  return body;
}

// startPicker starts the picker in the tab tabId: through page.js, which
// every http and https page has from its start; in a tab opened before the
// extension was loaded it is injected first (that page's earlier console
// errors are then not known).
async function startPicker(tabId) {
  const tab = await chrome.tabs.get(tabId);
  if (!tab.url || !/^https?:/.test(tab.url)) {
    throw new Error("snag captures web pages (http and https) only.");
  }
  try {
    await chrome.tabs.sendMessage(tabId, { type: "snag-pick" });
  } catch {
    await chrome.scripting.executeScript({ target: { tabId }, files: ["page.js"] });
    await chrome.tabs.sendMessage(tabId, { type: "snag-pick" });
  }
}

async function show() {
  const { snagd, credential, project } = await chrome.storage.local.get(["snagd", "credential", "project"]);
  const paired = Boolean(snagd && credential);
  $("unpaired").hidden = paired;
  $("paired").hidden = !paired;
  if (paired) {
    $("address").textContent = snagd;
    // The project's folder name; its whole path on hover.
    $("project").textContent = (project || "").split("/").filter(Boolean).pop() || "";
    $("project").title = project || "";
    $("project-line").hidden = !project;
    $("capture").focus();
  } else {
    if (snagd) $("line").placeholder = `${snagd} K7M-2QX`;
    $("line").focus();
  }
  return paired;
}

$("pair-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("pair").disabled = true;
  say("Pairing\u2026");
  try {
    await pair($("line").value);
    $("line").value = "";
    await show();
    say("Paired: this extension can now send captures, and nothing else.");
  } catch (err) {
    say(err.message, true);
  } finally {
    $("pair").disabled = false;
  }
});

$("capture").addEventListener("click", async () => {
  try {
    const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
    await startPicker(tab.id);
    window.close();
  } catch (err) {
    say(err.message, true);
  }
});

$("forget").addEventListener("click", async () => {
  await chrome.storage.local.remove(["credential", "project"]);
  await show();
  say("Forgotten. snag pair --revoke revokes the credential at snagd too.");
});

show();
