// An MCP client over Streamable HTTP that goes away without ending its
// session, as the official TypeScript SDK's close(), the Inspector and the
// conformance client do.
//
//   node ghost.mjs URL TOKEN TASK close|exit
//
// Connects to URL with the bearer TOKEN (no agent name: what the official
// clients send), claims TASK with snag_claim, prints one JSON line
// {"claimed": KEY}, waits for a line on stdin (the test has seen its GET
// stream open), then either calls client.close() (no DELETE is sent) or
// exits the process at once. Run by mcp/sessions_test.go
// (TestHTTPGhostSessionsEnd); `npm ci` here first.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, task, how] = process.argv.slice(2);
if (!url || !token || !task || (how !== 'close' && how !== 'exit')) {
  console.error('usage: node ghost.mjs URL TOKEN TASK close|exit');
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'ghost', version: '1.0.0' });
await client.connect(transport);
const res = await client.callTool({ name: 'snag_claim', arguments: { id: task } });
const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
if (res.isError) {
  console.error(`snag_claim ${task}: ${text}`);
  process.exit(1);
}
process.stdout.write(JSON.stringify({ claimed: res.structuredContent?.task?.key ?? task }) + '\n');
await new Promise((resolve) => {
  process.stdin.once('data', resolve);
  process.stdin.once('end', resolve);
});
if (how === 'close') {
  await client.close();
}
process.exit(0);
