/**
 * Builds the dashboard (web/dashboard) into dist/dashboard with vite, for the gateway to serve.
 *
 *   node web/dashboard/build.ts             build now
 *   node web/dashboard/build.ts --if-stale  build only when the sources or the lockfile changed
 *
 * Run by `npm ci`/`npm install` (prepare) and before `npm start` and `npm test`. vite, preact and
 * uplot are devDependencies: after `npm ci --omit=dev` there is nothing to build with, so this says
 * so and exits 0, and the gateway answers /dashboard with a page saying how to build it.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCE_DIR = fileURLToPath(new URL('.', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Where the gateway serves the dashboard from (src/http/routes/dashboard.ts). */
export const DASHBOARD_DIST = join(ROOT, 'dist', 'dashboard');
/** Fingerprint of what the last build was made from. */
const STAMP = join(DASHBOARD_DIST, '.source-hash');

export type BuildOutcome = 'built' | 'up to date' | 'no build tool';

export async function buildDashboard(options: { ifStale: boolean }): Promise<BuildOutcome> {
  const hash = sourceHash();
  if (options.ifStale && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === hash && existsSync(join(DASHBOARD_DIST, 'index.html'))) {
    return 'up to date';
  }
  let vite: typeof import('vite');
  try {
    vite = await import('vite');
  } catch {
    return 'no build tool';
  }
  await vite.build({
    configFile: false,
    root: SOURCE_DIR,
    base: '/dashboard/',
    logLevel: 'warn',
    // Every asset is bundled from the project's own dependencies: no CDN is reachable at run time.
    build: { outDir: DASHBOARD_DIST, emptyOutDir: true, assetsInlineLimit: 0, sourcemap: false, chunkSizeWarningLimit: 1024 },
    oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  });
  writeFileSync(STAMP, hash);
  return 'built';
}

/** The dashboard's sources and the lockfile (which pins preact, uplot and vite). */
function sourceHash(): string {
  const hash = createHash('sha256');
  const files = [join(ROOT, 'package-lock.json'), ...listFiles(SOURCE_DIR)].sort();
  for (const file of files) {
    hash.update(file.slice(ROOT.length));
    hash.update(readFileSync(file));
  }
  return hash.digest('hex');
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? listFiles(path) : [path];
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outcome = await buildDashboard({ ifStale: process.argv.includes('--if-stale') });
  if (outcome === 'built') console.log(`dashboard built into ${DASHBOARD_DIST}`);
  if (outcome === 'no build tool') {
    console.log('dashboard not built: vite is not installed (dev dependencies omitted). Install them and run `npm run build:dashboard` to serve /dashboard.');
  }
}
