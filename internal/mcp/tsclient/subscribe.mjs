// Resource subscriptions and completion with the official TypeScript MCP
// SDK client, over stdio (`snag mcp`) or Streamable HTTP (snagd's /mcp).
//
//   node subscribe.mjs stdio SNAGBIN PROJECTDIR
//   node subscribe.mjs http URL TOKEN
//
// Steps: initialize (the server must offer resources.subscribe and
// completions); completion/complete of snag://task/{id}'s id for "SNAG-1"
// (keys by prefix, capped at 100) and for an id prefix; subscribe to
// snag://queue and snag://task/SNAG-5; claim SNAG-5 (a change snagd's event
// stream reports) and wait for notifications/resources/updated of both;
// unsubscribe the task; release SNAG-5 and claim SNAG-4, and check that
// only the queue was notified after the unsubscribe. One JSON line per
// step to stdout; on a failure the last line has "ok": false, exit status 1.
//
// Run by mcp/tsclient_test.go (TestTypeScriptSubscribeAndComplete).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const [mode, a, b] = process.argv.slice(2);
let step = 'start';
const report = (fields) => process.stdout.write(JSON.stringify({ step, ok: true, ...fields }) + '\n');
const fail = (msg) => { throw new Error(msg); };

const updated = [];
const waiters = [];
function onUpdated(uri) {
  updated.push(uri);
  for (const w of waiters.splice(0)) w();
}
async function waitFor(what, cond, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    const left = deadline - Date.now();
    if (left <= 0) fail(`no ${what} in ${ms} ms; notifications so far: ${JSON.stringify(updated)}`);
    await new Promise((res) => { const t = setTimeout(res, left); waiters.push(() => { clearTimeout(t); res(); }); });
  }
}

async function main() {
  let transport;
  if (mode === 'stdio') {
    transport = new StdioClientTransport({ command: a, args: ['mcp'], cwd: b, env: process.env, stderr: 'inherit' });
  } else if (mode === 'http') {
    transport = new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
  } else {
    console.error('usage: node subscribe.mjs stdio SNAGBIN PROJECTDIR | http URL TOKEN');
    process.exit(2);
  }
  const client = new Client({ name: 'snag-subscribe-test', version: '1.0.0' });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => onUpdated(n.params.uri));

  step = 'initialize';
  await client.connect(transport);
  const caps = client.getServerCapabilities() ?? {};
  if (!caps.resources?.subscribe) fail(`resources.subscribe not offered: ${JSON.stringify(caps)}`);
  if (!caps.completions) fail(`completions not offered: ${JSON.stringify(caps)}`);
  report({ capabilities: Object.keys(caps) });

  step = 'completion/complete key prefix';
  const ref = { type: 'ref/resource', uri: 'snag://task/{id}' };
  let c = await client.complete({ ref, argument: { name: 'id', value: 'snag-1' } });
  const keys = c.completion.values;
  for (const want of ['SNAG-1', 'SNAG-10', 'SNAG-19']) if (!keys.includes(want)) fail(`"snag-1" does not complete to ${want}: ${keys}`);
  if (keys.some((k) => !k.toLowerCase().startsWith('snag-1'))) fail(`values that do not match the prefix: ${keys}`);
  if (keys[0] !== 'SNAG-1') fail(`SNAG-1 is not first: ${keys}`);
  report({ values: keys.length, total: c.completion.total });

  step = 'completion/complete id prefix';
  c = await client.complete({ ref, argument: { name: 'id', value: 'tsk_' } });
  if (c.completion.values.length === 0 || c.completion.values.length > 100) fail(`tsk_ completes to ${c.completion.values.length} values`);
  if (!c.completion.values.every((v) => v.startsWith('tsk_'))) fail(`not ids: ${c.completion.values}`);
  c = await client.complete({ ref, argument: { name: 'id', value: 'nothing-like-this' } });
  if (c.completion.values.length !== 0) fail(`an unknown prefix completes to ${c.completion.values}`);
  report({ ids: 'ok' });

  step = 'resources/subscribe';
  await client.subscribeResource({ uri: 'snag://queue' });
  await client.subscribeResource({ uri: 'snag://task/SNAG-5' });
  let refused = false;
  try { await client.subscribeResource({ uri: 'snag://nothing' }); } catch { refused = true; }
  if (!refused) fail('a subscription to snag://nothing was accepted');
  report({});

  step = 'notifications/resources/updated after a claim';
  const r = await client.callTool({ name: 'snag_claim', arguments: { id: 'SNAG-5' } });
  if (r.isError) fail(`claim: ${JSON.stringify(r.content)}`);
  await waitFor('update of snag://queue and snag://task/SNAG-5',
    () => updated.includes('snag://queue') && updated.includes('snag://task/SNAG-5'));
  report({ updated: [...new Set(updated)] });

  step = 'resources/unsubscribe';
  await client.unsubscribeResource({ uri: 'snag://task/SNAG-5' });
  updated.length = 0;
  const rel = await client.callTool({ name: 'snag_release', arguments: { id: 'SNAG-5', reason: 'subscription test' } });
  if (rel.isError) fail(`release: ${JSON.stringify(rel.content)}`);
  await waitFor('update of snag://queue after the release', () => updated.includes('snag://queue'));
  const n = updated.length;
  const cl = await client.callTool({ name: 'snag_claim', arguments: { id: 'SNAG-4' } });
  if (cl.isError) fail(`claim: ${JSON.stringify(cl.content)}`);
  await waitFor('update of snag://queue after a second claim', () => updated.length > n);
  if (updated.includes('snag://task/SNAG-5')) fail(`snag://task/SNAG-5 was notified after its unsubscribe: ${updated}`);
  report({ updated: [...new Set(updated)] });

  step = 'close';
  await client.close();
  report({});
}

main().then(() => process.exit(0), (err) => {
  process.stdout.write(JSON.stringify({ step, ok: false, error: String(err?.message ?? err) }) + '\n');
  process.exit(1);
});
