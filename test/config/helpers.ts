import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/config/errors.ts';
import { loadConfig, type LoadedConfig } from '../../src/config/load.ts';

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'floodgate-config-'));
}

/** Writes `floodgate.yaml` into a fresh temp dir; returns the dir and the file path. */
export function writeConfig(yaml: string, name = 'floodgate.yaml'): { dir: string; file: string } {
  const dir = tempDir();
  const file = join(dir, name);
  writeFileSync(file, yaml);
  return { dir, file };
}

export function load(yaml: string, env: Record<string, string> = {}): LoadedConfig {
  const { dir, file } = writeConfig(yaml);
  return loadConfig({ file, env, cwd: dir });
}

/** Loads and expects a ConfigError; returns its error list. */
export function errorsOf(yaml: string, env: Record<string, string> = {}): string[] {
  try {
    load(yaml, env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return err.errors;
  }
  assert.fail('expected the configuration to be rejected');
}

/** Asserts the configuration is rejected with exactly these errors (order-insensitive). */
export function assertErrors(yaml: string, expected: string[], env: Record<string, string> = {}): void {
  assert.deepEqual([...errorsOf(yaml, env)].sort(), [...expected].sort());
}
