#!/usr/bin/env node
// Plain JavaScript on purpose: an older Node cannot load the TypeScript sources, so this file must
// be able to say which Node is needed before it imports any of them.
// Optional Node.js flags for heavy deployments go on the command line: see docs/deployment.md.
import { existsSync } from 'node:fs';

const NEEDED = { major: 22, minor: 18 };
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);

if (major < NEEDED.major || (major === NEEDED.major && minor < NEEDED.minor)) {
  process.stderr.write(`Floodgate needs Node >= ${NEEDED.major}.${NEEDED.minor} (found ${process.version})\n`);
  process.exitCode = 1;
} else {
  // A checkout runs its sources (Node strips the types); an installed package ships the compiled
  // build instead (`npm pack` makes it), because Node strips no types under node_modules.
  const sources = new URL('../src/cli.ts', import.meta.url);
  await import(existsSync(sources) ? sources.href : new URL('../dist/cli.js', import.meta.url).href);
}
