/**
 * What a server's heap holds for each open stream: C long streams held open at once, then a heap
 * snapshot of the server (node's --heapsnapshot-signal), summed by kind of object and divided by
 * C. Everything the server holds anyway (its code, module sources, rules) is divided too, so
 * compare two targets rather than reading one alone; the difference between them is per stream.
 *
 *   node bench/tools/stream-heap.ts                           # floor and gateway (no rules), 1,000 streams
 *   node bench/tools/stream-heap.ts --targets floor,ten --concurrency 500 --top 40 --keep
 *   flags: --targets (floor,none) --concurrency N (1000) --top N (30) --keep (keep the snapshots)
 *
 * A target is `floor` (the minimal proxy) or a gateway configuration of bench/lib.ts.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { CHAT_PATH, REQUEST_HEADERS, longStreamBody, startUpstream, type ChildServer } from '../lib.ts';
import { parseTargets, startTarget, targetTitle, wholeNumber } from './targets.ts';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: 'floor,none' },
    concurrency: { type: 'string', default: '1000' },
    top: { type: 'string', default: '30' },
    keep: { type: 'boolean', default: false },
  },
  strict: true,
});

const concurrency = wholeNumber('concurrency', values.concurrency, 1);
const top = wholeNumber('top', values.top, 1);
const targets = parseTargets(values.targets);

/** Opens `concurrency` streams long enough to outlast the snapshot; resolves once all have their headers. */
async function holdStreams(server: ChildServer, agent: Agent): Promise<() => void> {
  // Warm the server's code paths first, so the snapshot is not of a cold process.
  for (let i = 0; i < 200; i++) {
    const res = await request(server.url + CHAT_PATH, { method: 'POST', headers: REQUEST_HEADERS, body: longStreamBody(3, 1), dispatcher: agent });
    await res.body.text();
  }
  const controller = new AbortController();
  const opened: Promise<void>[] = [];
  for (let i = 0; i < concurrency; i++) {
    opened.push(
      request(server.url + CHAT_PATH, { method: 'POST', headers: REQUEST_HEADERS, body: longStreamBody(400, 50), dispatcher: agent, signal: controller.signal }).then((res) => {
        res.body.on('data', () => {}).on('error', () => {});
      }),
    );
    if (i % 50 === 49) await sleep(5);
  }
  await Promise.all(opened);
  return () => controller.abort();
}

/** Signals the server to write a heap snapshot into `dir` and waits until the file stops growing. */
async function snapshot(server: ChildServer, dir: string): Promise<string> {
  process.kill(server.pid, 'SIGUSR2');
  for (let waited = 0; waited < 120_000; waited += 500) {
    await sleep(500);
    const name = readdirSync(dir).find((n) => n.endsWith('.heapsnapshot'));
    if (name === undefined) continue;
    const file = join(dir, name);
    const size = statSync(file).size;
    await sleep(1000);
    if (size > 0 && statSync(file).size === size) return file;
  }
  throw new Error(`${server.name} wrote no heap snapshot into ${dir}`);
}

interface HeapSnapshotFile {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size and count by kind: objects by constructor, strings together, code and V8's internals by their kind. */
function heapByKind(file: string): { total: number; kinds: Map<string, { count: number; bytes: number }> } {
  const heap = JSON.parse(readFileSync(file, 'utf8')) as HeapSnapshotFile;
  const fields = heap.snapshot.meta.node_fields;
  const typeNames = heap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = [fields.indexOf('type'), fields.indexOf('name'), fields.indexOf('self_size')];
  const kinds = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < heap.nodes.length; i += fields.length) {
    const type = typeNames[heap.nodes[i + typeAt]!]!;
    const name = heap.strings[heap.nodes[i + nameAt]!]!;
    const size = heap.nodes[i + sizeAt]!;
    const kind = type.endsWith('string') ? 'strings' : ['object', 'closure', 'native'].includes(type) ? `${type} ${name}` : `${type} ${name.slice(0, 40)}`.trimEnd();
    const entry = kinds.get(kind) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += size;
    kinds.set(kind, entry);
    total += size;
  }
  return { total, kinds };
}

const upstream = await startUpstream();
try {
  for (const target of targets) {
    const dir = mkdtempSync(join(tmpdir(), `floodgate-stream-heap-${target.name}-`));
    const flags = ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`];
    const server = await startTarget(target, upstream.url, flags);
    const agent = new Agent({ connections: concurrency + 10, keepAliveTimeout: 60_000 });
    try {
      const release = await holdStreams(server, agent);
      await sleep(2000);
      const file = await snapshot(server, dir);
      release();
      const { total, kinds } = heapByKind(file);
      console.log(`\n##### ${targetTitle(target)}: ${concurrency} streams open, heap ${(total / 1e6).toFixed(1)} MB = ${(total / concurrency / 1024).toFixed(1)} KB a stream`);
      const rows = [...kinds].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
      for (const [kind, { count, bytes }] of rows) {
        console.log(`${(bytes / concurrency).toFixed(0).padStart(8)} B ${(count / concurrency).toFixed(2).padStart(8)} a stream  ${kind}`);
      }
      if (values.keep) console.log(`kept: ${file}`);
    } finally {
      await agent.destroy();
      await server.stop();
      if (!values.keep) rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  await upstream.stop();
}
