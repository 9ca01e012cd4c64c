// snag capture: the service worker.
//
// page.js hands it a capture ("snag-capture") once the person pressed Send.
// It takes the screenshot of the visible tab (PNG), adds it, and posts the
// whole to the paired snagd's POST /captures with the capture credential
// (never snagd's token, which the extension does not have). It answers
// with the new task's alias, or with the sentence snagd gave. When snagd
// no longer knows the credential (snag pair --revoke), it forgets it, so
// the popup asks to pair again.

"use strict";

chrome.runtime.onMessage.addListener((msg, sender, reply) => {
  if (!msg || msg.type !== "snag-capture" || sender.id !== chrome.runtime.id || !sender.tab) return false;
  send(msg.capture, sender.tab).then(reply, (err) => reply({ error: "The extension failed: " + err.message }));
  return true; // the answer comes later
});

async function send(capture, tab) {
  const { snagd, credential } = await chrome.storage.local.get(["snagd", "credential"]);
  if (!snagd || !credential) {
    return { error: "This extension is not paired: run snag pair in your project and type its line into the extension's popup." };
  }
  let screenshot;
  try {
    if (!tab.active) {
      await chrome.tabs.update(tab.id, { active: true });
    }
    screenshot = await chrome.tabs.captureVisibleTab(tab.windowId, { format: "png" });
  } catch (err) {
    return { error: "The screenshot could not be taken: " + err.message };
  }
  let resp;
  try {
    resp = await fetch(`http://${snagd}/captures`, {
      method: "POST",
      headers: { Authorization: "Bearer " + credential, "Content-Type": "application/json" },
      body: JSON.stringify({ ...capture, screenshot }),
    });
  } catch (err) {
    return { error: `No snagd answers at ${snagd}: is it running? (snag daemon status; snag pair again if it moved)` };
  }
  const body = await resp.json().catch(() => ({}));
  if (resp.status === 201) {
    return { ok: true, key: body.key, path: body.path };
  }
  if (body.error === "not_paired") {
    await chrome.storage.local.remove(["credential"]);
  }
  return { error: body.message || `snagd answered ${resp.status}`, code: body.error, status: resp.status };
}
