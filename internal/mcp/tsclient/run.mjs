// Interop test of `snag mcp` with the official TypeScript MCP SDK client.
//
//   node run.mjs SNAGBIN PROJECTDIR
//
// Spawns `SNAGBIN mcp` over stdio with PROJECTDIR as its working directory
// and this process's environment, then: initialize, ping, tools/list, a call
// of every tool with valid arguments, resources/list, resources/templates/list
// and a read of every resource. The SDK validates each tool's
// structuredContent against its outputSchema (with a draft-07 validator), so
// a schema it rejects fails the call. One JSON line per step goes to stdout;
// on a failure the last line has "ok": false and names the step, the
// server's stderr goes to stderr, and the exit status is 1.
//
// Run by mcp/tsclient_test.go (TestTypeScriptClient); `npm ci` here first.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [snagBin, projectDir] = process.argv.slice(2);
if (!snagBin || !projectDir) {
  console.error('usage: node run.mjs SNAGBIN PROJECTDIR');
  process.exit(2);
}

// The default toolset, exactly (DESIGN section 9).
const TOOLS = [
  'snag_list', 'snag_get', 'snag_claim', 'snag_release',
  'snag_resolve', 'snag_add', 'snag_search', 'snag_screenshot',
];
// The resources (DESIGN section 9); snag://task/{id} is a template.
const RESOURCES = ['snag://queue', 'snag://plan', 'snag://map'];
const TASK_TEMPLATE = 'snag://task/{id}';
// Screenshots, as snag_get links them.
const SHOT_TEMPLATE = 'snag://shot/{name}';
// Keywords the SDK's draft-07 validator does not understand (DESIGN section 10).
const FORBIDDEN = ['prefixItems', 'unevaluatedItems', 'unevaluatedProperties', '$dynamicRef', '$dynamicAnchor'];

class StepError extends Error {}

let step = 'start';
let stderrText = '';

function report(fields) {
  process.stdout.write(JSON.stringify({ step, ok: true, ...fields }) + '\n');
}

function fail(message) {
  throw new StepError(message);
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function bytes(s) {
  return Buffer.byteLength(s ?? '', 'utf8');
}

// keyOf finds a task's id in a structured task, whatever the field is called.
function keyOf(task) {
  if (!task || typeof task !== 'object') return undefined;
  return task.key ?? task.id;
}

// shotTask finds, in the project's task files, a task with a screenshot and
// the file that holds it: the key from the front matter, not the file name.
function shotTask() {
  const dir = join(projectDir, '.snag', 'tasks');
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith('.md')) continue;
    const text = readFileSync(join(dir, name), 'utf8');
    const front = text.split(/^---$/m)[1] ?? '';
    const key = /^key:\s*(\S+)/m.exec(front)?.[1];
    if (key && /^\s*screenshots:\s*\[\s*\S/m.test(front)) return { key, file: join(dir, name) };
  }
  fail(`no task in ${dir} has a screenshot`);
}

function walkSchema(schema, path, found) {
  if (Array.isArray(schema)) {
    schema.forEach((s, i) => walkSchema(s, `${path}/${i}`, found));
  } else if (schema && typeof schema === 'object') {
    for (const [k, v] of Object.entries(schema)) {
      if (FORBIDDEN.includes(k)) found.push(`${path}/${k}`);
      walkSchema(v, `${path}/${k}`, found);
    }
  }
  return found;
}

// call runs one tool call as its own step: the SDK has validated the
// structured content by the time it returns; a tool error fails the step.
async function call(client, name, args, check) {
  step = `tools/call ${name}`;
  let result;
  try {
    result = await client.callTool({ name, arguments: args });
  } catch (err) {
    fail(`${err.message ?? err}`);
  }
  if (result.isError) fail(`tool error: ${textOf(result)}`);
  const sc = result.structuredContent;
  if (!sc || typeof sc !== 'object') fail('no structuredContent');
  if (sc.source !== 'daemon' && sc.source !== 'files') {
    fail(`structuredContent.source is ${JSON.stringify(sc.source)}, want "daemon" or "files"`);
  }
  const extra = check ? check(result, sc) : {};
  report({
    args,
    source: sc.source,
    content: (result.content ?? []).map((c) => c.type),
    text_bytes: bytes(textOf(result)),
    ...extra,
  });
  return result;
}

async function main() {
  const shot = shotTask();

  const transport = new StdioClientTransport({
    command: snagBin,
    args: ['mcp'],
    cwd: projectDir,
    env: { ...process.env },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk) => { stderrText += chunk; });
  const client = new Client({ name: 'snag-tsclient', version: '1.0.0' });

  try {
    step = 'initialize';
    const t0 = performance.now();
    await client.connect(transport);
    const server = client.getServerVersion();
    const instructions = client.getInstructions() ?? '';
    if (!server?.name) fail('no serverInfo');
    if (!instructions) fail('no instructions');
    if (!client.getServerCapabilities()?.tools) fail('no tools capability');
    if (!client.getServerCapabilities()?.resources) fail('no resources capability');
    report({ server, instructions_bytes: bytes(instructions), ms: Math.round(performance.now() - t0) });

    step = 'ping';
    await client.ping();
    report({});

    step = 'tools/list';
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    const names = tools.map((t) => t.name).sort();
    const missing = TOOLS.filter((n) => !names.includes(n));
    const extra = names.filter((n) => !TOOLS.includes(n));
    if (missing.length || extra.length) {
      fail(`tools ${JSON.stringify(names)}: missing ${JSON.stringify(missing)}, unexpected ${JSON.stringify(extra)}`);
    }
    const problems = [];
    for (const t of tools) {
      if (!t.outputSchema) problems.push(`${t.name} has no outputSchema`);
      else if (t.outputSchema.type !== 'object') problems.push(`${t.name}: outputSchema root is not an object`);
      walkSchema(t.inputSchema, `${t.name}.inputSchema`, problems);
      walkSchema(t.outputSchema, `${t.name}.outputSchema`, problems);
    }
    if (problems.length) fail(problems.join('; '));
    // listTools has also compiled every output schema with the SDK's validator.
    report({ tools: names, bytes: bytes(JSON.stringify({ tools })) });

    await call(client, 'snag_list', {}, (r, sc) => {
      if (!Array.isArray(sc.tasks)) fail('structuredContent.tasks is not a list');
      if (sc.tasks.length === 0) fail('no tasks listed');
      return { tasks: sc.tasks.length };
    });

    await call(client, 'snag_search', { query: 'checkout' }, (r, sc) => {
      const hits = Object.values(sc).find(Array.isArray);
      if (!hits || hits.length === 0) fail('no hits for "checkout"');
      return { hits: hits.length };
    });

    const got = await call(client, 'snag_get', { id: shot.key }, (r) => {
      const links = (r.content ?? []).filter((c) => c.type === 'resource_link');
      if (links.length === 0) fail(`${shot.key} has screenshots but no resource_link came back`);
      const bad = links.filter((l) => !l.uri.startsWith('snag://shot/'));
      if (bad.length) fail(`resource_links not snag://shot/: ${bad.map((l) => l.uri).join(', ')}`);
      if ((r.content ?? []).some((c) => c.type === 'image')) fail('an image inline in snag_get');
      return { id: shot.key, resource_links: links.length };
    });

    // The server reads back every screenshot it links.
    step = 'resources/read resource_link';
    for (const l of (got.content ?? []).filter((c) => c.type === 'resource_link')) {
      const res = await client.readResource({ uri: l.uri });
      const blob = res.contents?.[0]?.blob;
      if (!blob || res.contents[0].mimeType !== l.mimeType) fail(`${l.uri}: no blob of ${l.mimeType}`);
    }
    report({ links: 'read' });

    const first = await call(client, 'snag_claim', {}, (r, sc) => {
      if (!keyOf(sc.task)) fail(`nothing claimed: ${textOf(r)}`);
      return { id: keyOf(sc.task) };
    });
    const claimed = keyOf(first.structuredContent.task);

    await call(client, 'snag_release', { id: claimed, reason: 'interop test: giving it back' }, () => ({ id: claimed }));

    const second = await call(client, 'snag_claim', {}, (r, sc) => {
      if (!keyOf(sc.task)) fail(`nothing claimed after the release: ${textOf(r)}`);
      return { id: keyOf(sc.task) };
    });
    const again = keyOf(second.structuredContent.task);

    await call(client, 'snag_resolve', { id: again, note: 'interop test: resolved by the TypeScript client' }, () => ({ id: again }));

    await call(client, 'snag_add', {
      title: 'Interop test note from the TypeScript client',
      body: 'Added by mcp/tsclient/run.mjs.',
    }, (r, sc) => ({ id: keyOf(sc.task) ?? sc.key ?? sc.id }));

    await call(client, 'snag_screenshot', { id: shot.key, index: 0 }, (r) => {
      const img = (r.content ?? []).find((c) => c.type === 'image');
      if (!img) fail('no image content');
      if (!img.mimeType?.startsWith('image/')) fail(`image mimeType ${img.mimeType}`);
      const raw = Buffer.from(img.data, 'base64');
      if (raw.length === 0) fail('empty image');
      return { id: shot.key, mimeType: img.mimeType, image_bytes: raw.length };
    });

    step = 'resources/list';
    const resources = [];
    cursor = undefined;
    do {
      const page = await client.listResources(cursor ? { cursor } : {});
      resources.push(...page.resources);
      cursor = page.nextCursor;
    } while (cursor);
    const uris = resources.map((r) => r.uri);
    report({ resources: uris });

    step = 'resources/templates/list';
    const templates = [];
    cursor = undefined;
    do {
      const page = await client.listResourceTemplates(cursor ? { cursor } : {});
      templates.push(...page.resourceTemplates);
      cursor = page.nextCursor;
    } while (cursor);
    const tpls = templates.map((t) => t.uriTemplate);
    report({ templates: tpls });

    step = 'resources';
    const absent = RESOURCES.filter((u) => !uris.includes(u));
    if (!tpls.includes(TASK_TEMPLATE)) absent.push(TASK_TEMPLATE);
    if (absent.length) fail(`not offered: ${absent.join(', ')}`);

    const toRead = [...uris];
    for (const t of tpls) {
      if (t === TASK_TEMPLATE) toRead.push(`snag://task/${shot.key}`);
      else if (t === SHOT_TEMPLATE) toRead.push((got.content ?? []).find((c) => c.type === 'resource_link').uri);
      else if (t.includes('{')) fail(`a template this test does not know how to fill: ${t}`);
    }
    for (const uri of toRead) {
      step = `resources/read ${uri}`;
      const res = await client.readResource({ uri });
      if (!res.contents?.length) fail('no contents');
      const text = res.contents.map((c) => c.text ?? '').join('');
      const blob = res.contents.reduce((n, c) => n + (c.blob ? Buffer.from(c.blob, 'base64').length : 0), 0);
      if (!text && !blob) fail('empty contents');
      if (uri === `snag://task/${shot.key}`) {
        const file = readFileSync(shot.file, 'utf8');
        if (text !== file) fail(`not the bytes of ${shot.file} (${bytes(text)} bytes read, the file has ${bytes(file)})`);
      }
      report({ mimeType: res.contents[0].mimeType, bytes: bytes(text) + blob });
    }

    step = 'close';
    await client.close();
    report({});
  } finally {
    await client.close().catch(() => {});
  }
}

try {
  await main();
} catch (err) {
  const error = err instanceof StepError ? err.message : (err?.stack ?? String(err));
  process.stdout.write(JSON.stringify({ step, ok: false, error }) + '\n');
  console.error(`FAIL at ${step}: ${error}`);
  if (stderrText) console.error(`snag mcp stderr:\n${stderrText}`);
  process.exit(1);
}
