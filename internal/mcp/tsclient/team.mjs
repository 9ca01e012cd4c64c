// Interop test of the team toolset with the official TypeScript MCP SDK
// client.
//
//   node team.mjs SNAGBIN PROJECTDIR
//
// Spawns two `SNAGBIN mcp --toolsets queue,team,graph` bridges over stdio in
// PROJECTDIR and calls every team tool: ADA adopts its name, claims a task
// and files, checks and renews them, reports, and hands the task to BEA;
// BEA sees the handoff once in its context and holds the task. The SDK
// validates each result's structuredContent against the tool's
// outputSchema (listTools compiles them), so a schema it rejects fails the
// call. One JSON line per step goes to stdout; a failure exits 1 with the
// step named.
//
// Run by mcp/tsclient_test.go (TestTypeScriptTeamTools); `npm ci` here first.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [snagBin, projectDir] = process.argv.slice(2);
if (!snagBin || !projectDir) {
  console.error('usage: node team.mjs SNAGBIN PROJECTDIR');
  process.exit(2);
}

const TEAM = ['snag_context', 'snag_files', 'snag_plan', 'snag_report', 'snag_handoff', 'snag_note', 'snag_nodes', 'snag_link', 'snag_activity'];
let step = 'start';

function report(fields) {
  process.stdout.write(JSON.stringify({ step, ok: true, ...fields }) + '\n');
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

async function bridge(name) {
  const transport = new StdioClientTransport({
    command: snagBin, args: ['mcp', '--toolsets', 'queue,team,graph'], cwd: projectDir, env: process.env, stderr: 'pipe',
  });
  const client = new Client({ name: `snag-team-${name}`, version: '1.0.0' });
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  for (const t of TEAM) {
    if (!tools.includes(t)) throw new Error(`${name}: tools/list lacks ${t}`);
  }
  return client;
}

// call makes a tool call the SDK validates; wantError says how it ends.
async function call(client, name, args, wantError = false) {
  const result = await client.callTool({ name, arguments: args });
  if (!!result.isError !== wantError) {
    throw new Error(`${name}: isError ${!!result.isError}, want ${wantError}: ${textOf(result)}`);
  }
  if (!wantError && !result.structuredContent) throw new Error(`${name}: no structuredContent`);
  return result;
}

async function main() {
  step = 'connect';
  const ada = await bridge('ADA');
  const bea = await bridge('BEA');
  report({});

  step = 'context';
  let r = await call(ada, 'snag_context', { name: 'ADA' });
  if (r.structuredContent.name !== 'ADA') throw new Error(`ADA is ${r.structuredContent.name}`);
  r = await call(bea, 'snag_context', { name: 'BEA' });
  report({ bytes: Buffer.byteLength(textOf(r)) });

  step = 'claim';
  r = await call(ada, 'snag_claim', {});
  const key = r.structuredContent.task.key;
  report({ key });

  step = 'files';
  await call(ada, 'snag_files', { action: 'claim', paths: ['web/**/*.ts', 'src/cart.ts'], task: key, ttl_sec: 600 });
  await call(ada, 'snag_files', { action: 'claim', paths: ['src/cart.ts'], task: key });
  r = await call(bea, 'snag_files', { action: 'claim', paths: ['web/app/main.ts'] }, true);
  if (!textOf(r).includes('ADA holds')) throw new Error(`the refusal does not name ADA: ${textOf(r)}`);
  r = await call(bea, 'snag_files', { action: 'check', paths: ['web/app/main.ts', 'docs/x.md'] });
  if (!textOf(r).includes('docs/x.md: free')) throw new Error(`check: ${textOf(r)}`);
  await call(bea, 'snag_files', { action: 'claim', paths: ['docs/**'], exclusive: false });
  report({});

  step = 'plan';
  r = await call(ada, 'snag_plan', { action: 'create', title: 'Interop plan', body: 'Goals.' });
  const slug = r.structuredContent.plan.slug;
  if (r.structuredContent.plan.trust !== 'unvetted') throw new Error(`an agent's plan is ${r.structuredContent.plan.trust}`);
  await call(ada, 'snag_plan', { action: 'update', id: slug, body: 'Goals, then waves.' });
  await call(ada, 'snag_plan', { action: 'update', id: slug, status: 'active' }, true);
  await call(ada, 'snag_plan', { action: 'get', id: slug });
  r = await call(ada, 'snag_plan', { action: 'list' });
  if (!r.structuredContent.plans.some((p) => p.slug === slug)) throw new Error('list lacks the new plan');
  report({ slug });

  step = 'note';
  r = await call(ada, 'snag_note', { title: 'Interop uses the official SDK', body: 'Why: it validates schemas.', type: 'decision', task: key, files: ['mcp/tsclient/team.mjs'] });
  const note = r.structuredContent.notes[0].key;
  r = await call(bea, 'snag_note', {});
  if (!r.structuredContent.notes.some((n) => n.key === note)) throw new Error('recent decisions lack the note');
  r = await call(bea, 'snag_search', { query: 'official SDK' });
  if (!(r.structuredContent.notes ?? []).some((n) => n.key === note)) throw new Error('search does not find the note');
  // The graph: an observation that borrows from the decision, read back
  // with its edge both ways through the official SDK's schema checks.
  r = await call(bea, 'snag_note', { title: 'The SDK checks output schemas too', type: 'observation', took_from: note, why: 'the interop decision' });
  const obs = r.structuredContent.notes[0].key;
  r = await call(ada, 'snag_nodes', { id: note });
  if (!(r.structuredContent.nodes[0].in ?? []).some((l) => l.from === obs && l.kind === 'took_from')) throw new Error('snag_nodes lacks the took_from edge');
  r = await call(ada, 'snag_activity', {});
  if (typeof r.structuredContent.branches_total !== 'number') throw new Error('snag_activity lacks branches_total');
  report({ note });

  step = 'report';
  await call(ada, 'snag_report', { message: 'Cart rounding fixed in src/cart.ts', task: key, detail: 'tests pass' });
  report({});

  step = 'handoff';
  r = await call(ada, 'snag_handoff', { to: 'BEA', title: 'Please verify on Safari', body: 'Fix is in.', task: key });
  if (!r.structuredContent.moved) throw new Error(`the lease did not move: ${textOf(r)}`);
  r = await call(bea, 'snag_context', {});
  const text = textOf(r);
  if (!text.includes('Please verify on Safari') || !text.includes(key)) throw new Error(`BEA's context: ${text}`);
  r = await call(bea, 'snag_context', {});
  if (textOf(r).includes('Please verify on Safari')) throw new Error('the handoff was shown twice');
  await call(bea, 'snag_release', { id: key, reason: 'interop test done' });
  report({});

  step = 'release files';
  await call(ada, 'snag_files', { action: 'release' });
  await call(bea, 'snag_files', { action: 'release', paths: ['docs/**'] });
  report({});

  step = 'close';
  await ada.close();
  await bea.close();
  report({});
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ step, ok: false, error: String(err?.message ?? err) }) + '\n');
  process.exit(1);
});
