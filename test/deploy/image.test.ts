/**
 * What the container image does, without a container (this machine cannot pull base images): the
 * Dockerfile's two stages done by hand. The build context (the repository less .dockerignore's
 * entries) is packed with `npm pack`, whose prepack compiles the gateway and builds the dashboard;
 * the tarball is unpacked into an empty folder with the lockfile and its production dependencies
 * only (`npm ci --omit=dev`, from the npm registry). Then the Dockerfile's ENTRYPOINT starts it,
 * its HEALTHCHECK and the Deployment's probes are asked, and SIGTERM must drain it and end it
 * with exit 0.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { listeningUrl, logLines, withTimeout, type Run } from '../support/cli.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { accepts, eventually, freePort } from '../support/processes.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The runtime stage of the Dockerfile: its JSON-form instructions. */
function runtimeStage(): { entrypoint: string[]; healthcheck: string[]; user: string } {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n\s*/g, ' ');
  const stages = text.split(/^FROM /m);
  assert.equal(stages.length, 3, 'two stages');
  const last = stages[2]!;
  const json = (instruction: string): string[] => JSON.parse(new RegExp(`^${instruction} (\\[.*\\])$`, 'm').exec(last)![1]!) as string[];
  return {
    entrypoint: json('ENTRYPOINT'),
    healthcheck: json('HEALTHCHECK .*?CMD'),
    user: /^USER (\S+)$/m.exec(last)![1]!,
  };
}

/** Whether .dockerignore keeps `path` (relative to the root) out of the build context: a pattern matches it or a folder above it. */
function ignoredByDocker(path: string): boolean {
  const patterns = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const parts = path.split('/');
  return patterns.some((pattern) => {
    const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}$`);
    return parts.some((_, i) => regex.test(parts.slice(0, i + 1).join('/')));
  });
}

function run(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} in ${cwd}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** The Deployment's HTTP probes (path and kind) from the Kubernetes manifests. */
function deploymentProbes(): Record<string, string> {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy/kubernetes/floodgate.yaml'), 'utf8')).map((d) => d.toJS() as Record<string, any>);
  const container = docs.find((d) => d.kind === 'Deployment')!.spec.template.spec.containers[0];
  return { liveness: container.livenessProbe.httpGet.path, readiness: container.readinessProbe.httpGet.path, startup: container.startupProbe.httpGet.path };
}

describe('the package the container image runs', () => {
  const work = mkdtempSync(join(tmpdir(), 'floodgate-image-'));
  const context = join(work, 'context');
  const app = join(work, 'app');
  let fake: FakeUpstream;
  let gateway: Run | undefined;

  before(async () => {
    fake = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
  });
  after(async () => {
    if (gateway !== undefined && gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGKILL');
    await fake?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('is built from the build context by npm pack: the compiled gateway and the built dashboard, nothing else', () => {
    cpSync(ROOT, context, { recursive: true, filter: (source) => source === ROOT.replace(/\/$/, '') || !ignoredByDocker(relative(ROOT, source)) });
    assert.ok(!existsSync(join(context, 'node_modules')) && !existsSync(join(context, 'dist')) && !existsSync(join(context, 'test')), 'the context leaves out what .dockerignore names');
    // The first stage's `npm ci`: the repository's own dependencies serve here.
    symlinkSync(join(ROOT, 'node_modules'), join(context, 'node_modules'));
    mkdirSync(join(work, 'pack'));
    run('npm', ['pack', '--pack-destination', join(work, 'pack')], context);
    const [tarball] = readdirSync(join(work, 'pack'));
    assert.match(tarball ?? '', /^floodgate-\d+\.\d+\.\d+\.tgz$/);

    mkdirSync(app);
    run('tar', ['-xzf', join(work, 'pack', tarball!), '-C', app, '--strip-components=1'], work);
    for (const file of ['bin/floodgate.js', 'dist/cli.js', 'dist/dashboard/index.html', 'package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']) {
      assert.ok(existsSync(join(app, file)), `the package has ${file}`);
    }
    for (const absent of ['src', 'test', 'web', 'bench', 'docs', 'dist/cli.js.map']) assert.ok(!existsSync(join(app, absent)), `the package has no ${absent}`);
  });

  it('installs with its production dependencies only, as the lockfile pins them', () => {
    writeFileSync(join(app, 'package-lock.json'), readFileSync(join(ROOT, 'package-lock.json')));
    run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], app);
    for (const dependency of ['fastify', 'better-sqlite3', 'pg', 'prom-client']) assert.ok(existsSync(join(app, 'node_modules', dependency)), dependency);
    for (const dev of ['typescript', 'vite', 'openai', 'node']) assert.ok(!existsSync(join(app, 'node_modules', dev)), `no ${dev}`);
  });

  it('starts from the ENTRYPOINT as a non-root user would, passes its HEALTHCHECK and probes, and drains on SIGTERM to exit 0', async () => {
    const { entrypoint, healthcheck, user } = runtimeStage();
    assert.deepEqual(entrypoint, ['node', 'bin/floodgate.js']);
    assert.notEqual(user, 'root');
    assert.equal(healthcheck[0], 'node');

    const port = await freePort();
    const config = join(work, 'floodgate.yaml');
    writeFileSync(config, `providers:\n${openaiProvider('up', fake.url, ['gpt-x'])}`);
    const env = { PATH: process.env.PATH ?? '', HOME: work, NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), SQLITE_PATH: join(work, 'data', 'floodgate.db'), FLOODGATE_CONFIG: config };
    const child = spawn(process.execPath, entrypoint.slice(1), { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString('utf8'); });
    child.stderr.on('data', (d: Buffer) => { err += d.toString('utf8'); });
    gateway = { child, stdout: () => out, stderr: () => err, exit: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
    const url = await listeningUrl(gateway);
    assert.equal(url, `http://127.0.0.1:${port}`);

    const healthcheckExit = (): number | null => spawnSync(process.execPath, healthcheck.slice(1), { env: { PATH: env.PATH, PORT: String(port) }, timeout: 10_000 }).status;
    assert.equal(healthcheckExit(), 0, 'HEALTHCHECK passes');
    for (const [probe, path] of Object.entries(deploymentProbes())) {
      assert.equal((await fetch(`${url}${path}`)).status, 200, `the ${probe} probe ${path}`);
    }
    const dashboard = await fetch(`${url}/dashboard`);
    assert.equal(dashboard.status, 200, 'the prebuilt dashboard is served');
    assert.match(await dashboard.text(), /\/dashboard\/assets\//);

    const release = fake.holdStreamNext();
    const stream = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: 'in flight at SIGTERM' }] }),
    });
    assert.equal(stream.status, 200);
    const reader = stream.body!.getReader();
    await reader.read();

    child.kill('SIGTERM');
    let ready = 0;
    assert.ok(await eventually(async () => (ready = (await fetch(`${url}/ready`)).status) === 503, 5000), `ready answered ${ready}`);
    assert.deepEqual(await (await fetch(`${url}/ready`)).json(), { status: 'draining' });
    release();
    while (!(await reader.read()).done) { /* the rest of the stream */ }

    const { code, signal } = await withTimeout(gateway.exit, 15_000, 'the gateway to exit');
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, err);
    assert.equal(await accepts(port), false);
    assert.equal(healthcheckExit(), 1, 'HEALTHCHECK fails once the gateway is gone');
    const lines = logLines(out);
    assert.ok(lines.some((l) => l.msg === 'draining: waiting for the requests in flight'), out);
    assert.ok(lines.some((l) => l.msg === 'stopped'), out);
  });
});
