// Interop test of snagd's hosted /mcp with the official TypeScript MCP SDK
// client, over HTTPS, as an agent on another machine reaches it.
//
//   node hosted.mjs session URL
//   node hosted.mjs connect URL
//
// The token comes from $SNAG_TOKEN, as the README tells users to keep it
// (their environment or secret store, never a committed config), and goes
// into every request as `Authorization: Bearer` through the transport's
// requestInit.headers; with $SNAG_TOKEN unset no Authorization is sent. The
// server's certificate is trusted the way a person trusts a private CA:
// NODE_EXTRA_CA_CERTS names its PEM file. Nothing here turns certificate
// checks off.
//
// session: initialize, tools/list, snag_list, snag_claim (one task), then
// snag_get of it; it then waits for a line on stdin (the Go test checks
// snagd's local API meanwhile, while the session holds the task), ends the
// session (DELETE /mcp, with the token) and closes.
//
// connect: initialize only, then ends the session; it is how the test sees
// a refusal (a wrong or short token: 401; a Host snagd does not answer to:
// 403; an untrusted certificate: a TLS error) as this client sees it.
//
// One JSON line per step goes to stdout. A failure's line has "ok": false,
// the step, the error, and "status" (the HTTP status the SDK reports) or
// "cause" (the network error's code), and the exit status is 1.
//
// Run by mcp/tsclient_hosted_test.go (TestHostedMCPWithTheTypeScriptSDK);
// `npm ci` here first.

import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, url] = process.argv.slice(2);
if (!['session', 'connect'].includes(mode) || !url) {
  console.error('usage: node hosted.mjs session|connect URL   (the token in $SNAG_TOKEN)');
  process.exit(2);
}

let step = 'start';

function report(fields) {
  process.stdout.write(JSON.stringify({ step, ok: true, ...fields }) + '\n');
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// call makes a tool call the SDK validates against the tool's output
// schema; a tool error fails the step.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name}: ${textOf(result)}`);
  if (!result.structuredContent) throw new Error(`${name}: no structuredContent`);
  return result.structuredContent;
}

// The token from the environment, into the headers of every request the
// transport sends (POST, the GET stream, DELETE), as the README says.
const headers = {};
if (process.env.SNAG_TOKEN !== undefined) headers.Authorization = `Bearer ${process.env.SNAG_TOKEN}`;
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers },
});
const client = new Client({ name: 'snag-hosted-ts', version: '1.0.0' });

// end ends the session on the server (DELETE /mcp) and closes the client.
async function end() {
  step = 'close';
  await transport.terminateSession();
  await client.close();
  report({});
}

// nextLine resolves with the next line on stdin (or '' at its end), and
// lets go of stdin, so that it keeps node running no longer.
function nextLine() {
  const rl = createInterface({ input: process.stdin });
  return new Promise((resolve) => {
    let got = '';
    rl.once('line', (line) => { got = line; rl.close(); });
    rl.once('close', () => { process.stdin.destroy(); resolve(got); });
  });
}

async function main() {
  step = 'connect';
  await client.connect(transport);
  const server = client.getServerVersion();
  report({ server: server?.name, session: transport.sessionId, protocol: transport.protocolVersion });
  if (mode === 'connect') return end();

  step = 'tools/list';
  const tools = (await client.listTools()).tools.map((t) => t.name);
  report({ tools });

  step = 'snag_list';
  let sc = await call(client, 'snag_list', {});
  report({ source: sc.source, tasks: (sc.tasks ?? []).length });

  step = 'snag_claim';
  sc = await call(client, 'snag_claim', {});
  const key = sc.task?.key;
  if (!key) throw new Error(`snag_claim claimed nothing: ${JSON.stringify(sc)}`);
  report({ key, task_status: sc.task.status });

  step = 'snag_get';
  sc = await call(client, 'snag_get', { id: key });
  report({ key: sc.task?.key, task_status: sc.task?.status });

  step = 'wait';
  await nextLine();
  return end();
}

main().catch((err) => {
  const fields = { step, ok: false, error: String(err?.message ?? err) };
  if (typeof err?.code === 'number') fields.status = err.code;
  const cause = err?.cause?.code ?? err?.cause?.cause?.code;
  if (cause) fields.cause = cause;
  process.stdout.write(JSON.stringify(fields) + '\n');
  process.exit(1);
});
