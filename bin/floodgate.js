#!/usr/bin/env -S node --no-memory-reducer --min-semi-space-size=64
// The flags must reach V8 before it creates the heap: see STARTUP_V8_FLAGS in src/runtime/v8-tuning.ts.
// Runs the compiled build when present (`npm run build`), else the TypeScript sources directly
// (Node >= 22.18 strips types natively outside node_modules).
import { existsSync } from 'node:fs';
const compiled = new URL('../dist/cli.js', import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL('../src/cli.ts', import.meta.url).href);
