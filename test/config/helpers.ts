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

/**
 * Loads a config file. Messages lose their `<file>:<line>:<column>: ` prefix here, so that the
 * tests of what they say need not count lines; test/config/positions.test.ts tests the prefixes.
 */
export function load(yaml: string, env: Record<string, string> = {}): LoadedConfig {
  const { dir, file } = writeConfig(yaml);
  try {
    const loaded = loadConfig({ file, env, cwd: dir });
    return { ...loaded, warnings: loaded.warnings.map((w) => withoutPlace(w, file)) };
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(err.errors.map((e) => withoutPlace(e, file)), err.warnings.map((w) => withoutPlace(w, file)));
    throw err;
  }
}

export function withoutPlace(message: string, file: string): string {
  return message.startsWith(`${file}:`) ? message.replace(/^[^\n]*?:\d+:\d+: /, '') : message;
}

/**
 * Loads `floodgate.yaml` as an operator in its folder would (`--config floodgate.yaml`), messages
 * as they are: the ConfigError, or the loaded config.
 */
export function loadAsGiven(yaml: string, env: Record<string, string> = {}): { error?: ConfigError; loaded?: LoadedConfig } {
  const { dir } = writeConfig(yaml);
  try {
    return { loaded: loadConfig({ file: 'floodgate.yaml', env, cwd: dir }) };
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return { error: err };
  }
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
