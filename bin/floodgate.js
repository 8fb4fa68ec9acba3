#!/usr/bin/env node
// Optional Node.js flags for heavy deployments go in NODE_OPTIONS: see docs/deployment.md.
// Runs the compiled build when present (`npm run build`), else the TypeScript sources directly
// (Node >= 22.18 strips types natively outside node_modules).
import { existsSync } from 'node:fs';
const compiled = new URL('../dist/cli.js', import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL('../src/cli.ts', import.meta.url).href);
