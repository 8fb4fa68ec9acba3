/**
 * Loads the gateway configuration: file resolution, YAML parsing, interpolation, environment
 * overrides, schema validation, rate-limit seeds and cross-reference checks. All problems are
 * collected and thrown together as one ConfigError so an operator sees every mistake at once.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { isAbsolute, relative, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { applyEnvOverrides, parseBudgetEnv, parsePort, parseRateLimitEnv, type EnvBudgetEntry, type EnvRuleEntry } from './env.ts';
import { ConfigError, formatPath } from './errors.ts';
import { interpolate, type Env, type UnsetReference } from './interpolate.ts';
import { formatIssues } from './issues.ts';
import { positionOf } from './positions.ts';
import { DEFAULT_HOST, configSchema, type BudgetLimitConfig, type GatewayConfig, type LimitConfig } from './schema.ts';
import { suggestKey } from './suggest.ts';
import { isAbsent } from '../shared/config-fields.ts';
import { buildBudgetSeeds, buildSeeds, type BudgetEntry, type BudgetSeed, type RuleEntry, type RuleSeed } from './seeds.ts';

export type { GatewayConfig } from './schema.ts';
export type { BudgetSeed, RuleSeed } from './seeds.ts';

const BUILT_IN_DEFAULTS = 'built-in defaults';
const DEFAULT_CONFIG_FILE = 'floodgate.yaml';
/** Instance name of the built-in provider served when none is configured, so a first run works offline. */
const BUILT_IN_MOCK_PROVIDER = 'mock';

export const TOKEN_RULES_WITHOUT_USAGE_WARNING =
  'token limits are configured but usage tracking is off (USAGE_ENABLED=false); they will not be enforced';

export const BUDGETS_WITHOUT_USAGE_WARNING =
  'budgets are configured but usage tracking is off (USAGE_ENABLED=false): no spend is recorded, so they will not be reached';

export interface LoadOptions {
  /** Explicit config file (`--config`); relative paths resolve against `cwd`. */
  file?: string | undefined;
  env: NodeJS.ProcessEnv;
  cwd?: string | undefined;
  /** `--port`, which wins over PORT and the file. */
  portOverride?: number | undefined;
}

export interface LoadedConfig {
  config: GatewayConfig;
  rateLimitSeeds: RuleSeed[];
  budgetSeeds: BudgetSeed[];
  /** Absolute path of the file read, or 'built-in defaults'. */
  source: string;
  warnings: string[];
}

interface ResolvedFile {
  path: string;
  /** How the file is named in seed origins (relative to cwd when inside it). */
  label: string;
  /** How the file is named in messages: as the operator gave it. */
  shown: string;
}

/** `file:line:column` of a key path in the config file; `exact` when the key itself is there (else its nearest ancestor). */
type Locate = (path: readonly PropertyKey[], key: boolean) => { place: string; exact: boolean } | undefined;

/** Whether a listen address is reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/** Loads and validates the configuration; throws ConfigError listing every problem. */
export function loadConfig(options: LoadOptions): LoadedConfig {
  const env: Env = options.env;
  const cwd = options.cwd ?? process.cwd();
  const errors: string[] = [];
  const warnings: string[] = [];

  // 1. Which file, and its parsed tree.
  const resolved = resolveFile(options.file, env, cwd, errors);
  let tree: unknown = {};
  let locate: Locate = () => undefined;
  if (resolved) {
    const parsed = readYaml(resolved, errors, warnings);
    if (parsed !== undefined) ({ tree, locate } = parsed);
  }
  // A YAML or file error leaves no trustworthy tree, but env problems are still worth reporting.
  const fileOk = errors.length === 0;

  // 2. Interpolation over string scalars.
  const interpolated = interpolate(tree, env);
  errors.push(...interpolated.errors);
  const raw: unknown = interpolated.value === null || interpolated.value === undefined ? {} : interpolated.value;

  // 3. Environment overrides are written into the tree so they pass the same validation.
  // Their errors are listed after the file's own, which is where an operator looks first.
  const envErrors: string[] = [];
  /** Key paths an environment variable set → the variable: a message about such a value names it instead of a line. */
  const overridden = new Map<string, string>();
  const inFile: Locate = (path, key) => (overridden.has(formatPath(path)) ? undefined : locate(path, key));
  const placeOf = (path: readonly PropertyKey[], key: boolean): string | undefined => overridden.get(formatPath(path)) ?? inFile(path, key)?.place;
  const at = (path: readonly PropertyKey[], key = false): string => {
    const place = placeOf(path, key);
    return place === undefined ? '' : `${place}: `;
  };
  if (isPlainObject(raw)) {
    const overrides = applyEnvOverrides(raw, env);
    envErrors.push(...overrides.errors);
    for (const { variable, path } of overrides.applied) overridden.set(formatPath(path), variable);
    if (options.portOverride !== undefined) {
      const port = parsePort(options.portOverride);
      if (port === undefined) envErrors.push(`--port: must be an integer 0..65535, got ${options.portOverride}`);
      else setPort(raw, port);
    }
  }
  const envRules = parseRateLimitEnv(env);
  envErrors.push(...envRules.errors);
  const envBudgets = parseBudgetEnv(env);
  envErrors.push(...envBudgets.errors);

  // 4. Schema. Cross-reference checks below need a valid tree, so they only run when it is.
  if (!fileOk) throw new ConfigError([...errors, ...envErrors], warnings);
  const result = configSchema.safeParse(raw, { reportInput: true });
  /** Key paths with an error: an unset variable there is named in the error, not warned about as well. */
  const failed = new Set<string>();
  if (!result.success) {
    for (const issue of result.error.issues) {
      failed.add(formatPath(issue.path));
      if (issue.code === 'unrecognized_keys') for (const key of issue.keys) failed.add(formatPath([...issue.path, key]));
    }
    errors.push(...formatIssues(result.error.issues, {
      unset: interpolated.unset,
      locate: placeOf,
      suggest: (path, key) => suggestKey(configSchema, path, raw, key),
    }));
  }
  // Judged on the tree as written, so that it is found beside the schema's errors; a malformed
  // reference left its text in place, though: no host to judge then.
  const open = interpolated.errors.length === 0 ? openPublicHost(raw, interpolated.unset, inFile) : undefined;
  if (open !== undefined) {
    errors.push(open);
    failed.add('server.master_key');
  }
  warnings.push(...unsetWarnings(interpolated.unset, (path) => overridden.has(formatPath(path)) || failed.has(formatPath(path)), at));
  errors.push(...envErrors);
  if (!result.success) throw new ConfigError(errors, warnings);
  const config = result.data;

  // 5. Rate-limit seeds: env entries replace YAML entries for the same subject.
  const fileLabel = resolved?.label ?? BUILT_IN_DEFAULTS;
  const entries = mergeRuleEntries(config, envRules.userPaths, envRules.providers, fileLabel);
  const seeds = buildSeeds(entries);
  errors.push(...seeds.errors);
  const budgets = buildBudgetSeeds(mergeBudgetEntries(config, envBudgets.userPaths, fileLabel));
  errors.push(...budgets.errors);

  // 6. Cross references.
  checkReferences(config, entries, errors, warnings, at);
  if (!config.usage.enabled && seeds.seeds.some((s) => s.maxTokens !== undefined)) {
    warnings.push(TOKEN_RULES_WITHOUT_USAGE_WARNING);
  }
  if (!config.usage.enabled && config.budgets.enabled && budgets.seeds.length > 0) warnings.push(BUDGETS_WITHOUT_USAGE_WARNING);

  if (errors.length > 0) throw new ConfigError(errors, warnings);
  return { config, rateLimitSeeds: seeds.seeds, budgetSeeds: budgets.seeds, source: resolved?.path ?? BUILT_IN_DEFAULTS, warnings };
}

// ---- file -----------------------------------------------------------------------------------

function resolveFile(file: string | undefined, env: Env, cwd: string, errors: string[]): ResolvedFile | undefined {
  let chosen: string | undefined;
  let via = '';
  if (file !== undefined && file !== '') {
    chosen = file;
  } else if (env['FLOODGATE_CONFIG'] !== undefined && env['FLOODGATE_CONFIG'].trim() !== '') {
    chosen = env['FLOODGATE_CONFIG'].trim();
    via = 'FLOODGATE_CONFIG: ';
  } else {
    if (!existsSync(resolve(cwd, DEFAULT_CONFIG_FILE))) return undefined;
    chosen = DEFAULT_CONFIG_FILE;
  }
  const path = resolve(cwd, chosen);
  if (!existsSync(path)) {
    errors.push(`${via}config file not found: ${path}`);
    return undefined;
  }
  const rel = relative(cwd, path);
  const label = rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
  return { path, label, shown: chosen };
}

function readYaml(file: ResolvedFile, errors: string[], warnings: string[]): { tree: unknown; locate: Locate } | undefined {
  let text: string;
  try {
    text = readFileSync(file.path, 'utf8');
  } catch (err) {
    errors.push(`cannot read config file ${file.path}: ${(err as Error).message}`);
    return undefined;
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const at = (offset: number): string => {
    const { line, col } = lineCounter.linePos(offset);
    return `${file.shown}:${line}:${col}`;
  };
  for (const w of doc.warnings) warnings.push(`${at(w.pos[0])}: ${w.message}`);
  if (doc.errors.length > 0) {
    // Later parse errors are mostly a cascade of the first one, so only the first is shown in full.
    const [first] = doc.errors;
    const more = doc.errors.length - 1;
    if (first) {
      errors.push(`${at(first.pos[0])}: YAML syntax error: ${first.message}${more > 0 ? ` (and ${more} more after it)` : ''}`);
    }
    return undefined;
  }
  let tree: unknown;
  try {
    tree = doc.toJS();
  } catch (err) {
    // e.g. excessive alias expansion ("billion laughs").
    errors.push(`${file.shown}: ${(err as Error).message}`);
    return undefined;
  }
  return {
    tree,
    locate: (path, key) => {
      const found = positionOf(doc, path, key);
      return found === undefined ? undefined : { place: at(found.offset), exact: found.exact };
    },
  };
}

/**
 * A gateway reachable from other machines must not run open: found here, so that
 * `check-config` reports it as start-up would. Placed at `master_key` in the file when it is
 * there (an unset `${MASTER_KEY}`, say), else at `host`.
 */
function openPublicHost(raw: unknown, unset: ReadonlyMap<string, UnsetReference>, locate: Locate): string | undefined {
  const server = isPlainObject(raw) && isPlainObject(raw['server']) ? raw['server'] : {};
  const host = isAbsent(server['host']) ? DEFAULT_HOST : server['host'];
  const masterKey = server['master_key'];
  // A host of the wrong type is the schema's to report.
  if (!isAbsent(masterKey) || typeof host !== 'string' || isLoopbackHost(host)) return undefined;
  const place = [['server', 'master_key'], ['server', 'host']].map((path) => locate(path, false)).find((found) => found?.exact);
  const names = unset.get('server.master_key')?.names;
  const note = names === undefined ? '' : ` (${names.map((n) => `\${${n}}`).join(', ')} is not set)`;
  return `${place === undefined ? '' : `${place.place}: `}server.master_key: ${nonLoopbackMessage(host)}${note}`;
}

/** Why a non-loopback host needs a master key, naming both settings. */
export function nonLoopbackMessage(host: string): string {
  return `refusing to listen on non-loopback HOST ${host} without MASTER_KEY: set MASTER_KEY, or HOST=127.0.0.1`;
}

/** One warning per value that named an unset variable, naming each variable. */
function unsetWarnings(unset: ReadonlyMap<string, UnsetReference>, skip: (path: readonly PropertyKey[]) => boolean, at: (path: readonly PropertyKey[]) => string): string[] {
  const warnings: string[] = [];
  for (const { path, names, whole } of unset.values()) {
    if (skip(path)) continue;
    const vars = names.map((n) => `\${${n}}`).join(', ');
    const outcome = whole ? 'the key counts as absent' : 'substituted an empty string';
    warnings.push(`${at(path)}${formatPath(path)}: ${vars} ${names.length === 1 ? 'is' : 'are'} not set; ${outcome}`);
  }
  return warnings;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function setPort(tree: Record<string, unknown>, port: number): void {
  const server = tree['server'];
  if (server === undefined || server === null) tree['server'] = { port };
  else if (isPlainObject(server)) server['port'] = port;
}

// ---- rate-limit entries ---------------------------------------------------------------------

function mergeRuleEntries(
  config: GatewayConfig,
  envUserPaths: readonly EnvRuleEntry[],
  envProviders: readonly EnvRuleEntry[],
  fileLabel: string,
): RuleEntry[] {
  const rl = config.rate_limits;
  const envPathKeys = new Set(envUserPaths.map((e) => e.subject.toLowerCase()));
  const envProviderKeys = new Set(envProviders.map((e) => e.subject.toLowerCase()));

  const entries: RuleEntry[] = [];
  const keptPaths: { path: string; limits: LimitConfig[] }[] = [];
  rl.user_paths.forEach((item, i) => {
    if (envPathKeys.has(item.path.toLowerCase())) return;
    keptPaths.push(item);
    entries.push(yamlEntry('user_path', item.path, item.limits, fileLabel, `rate_limits.user_paths[${i}]`));
  });
  const keptProviders: { name: string; limits: LimitConfig[] }[] = [];
  rl.providers.forEach((item, i) => {
    if (envProviderKeys.has(item.name.toLowerCase())) return;
    keptProviders.push(item);
    entries.push(yamlEntry('provider', item.name, item.limits, fileLabel, `rate_limits.providers[${i}]`));
  });
  rl.models.forEach((item, i) => {
    entries.push(yamlEntry('model', item.model, item.limits, fileLabel, `rate_limits.models[${i}]`));
  });
  for (const e of envUserPaths) {
    keptPaths.push({ path: e.subject, limits: e.limits });
    entries.push({ scope: 'user_path', subject: e.subject, limits: e.limits, origin: `env ${e.variable}`, indexLimits: false });
  }
  for (const e of envProviders) {
    keptProviders.push({ name: e.subject, limits: e.limits });
    entries.push({ scope: 'provider', subject: e.subject, limits: e.limits, origin: `env ${e.variable}`, indexLimits: false });
  }
  // The resolved config shows the effective rules, env replacements included.
  rl.user_paths = keptPaths;
  rl.providers = keptProviders;
  return entries;
}

/** Budget declarations: an env variable replaces the YAML entry for the same path. */
function mergeBudgetEntries(config: GatewayConfig, envUserPaths: readonly EnvBudgetEntry[], fileLabel: string): BudgetEntry[] {
  const envPathKeys = new Set(envUserPaths.map((e) => e.userPath.toLowerCase()));
  const entries: BudgetEntry[] = [];
  const kept: { path: string; limits: BudgetLimitConfig[] }[] = [];
  config.budgets.user_paths.forEach((item, i) => {
    if (envPathKeys.has(item.path.toLowerCase())) return;
    kept.push(item);
    entries.push({ userPath: item.path, limits: item.limits, origin: `${fileLabel} budgets.user_paths[${i}]`, indexLimits: true });
  });
  for (const e of envUserPaths) {
    kept.push({ path: e.userPath, limits: e.limits });
    entries.push({ userPath: e.userPath, limits: e.limits, origin: `env ${e.variable}`, indexLimits: false });
  }
  // The resolved config shows the effective budgets, env replacements included.
  config.budgets.user_paths = kept;
  return entries;
}

function yamlEntry(
  scope: RuleEntry['scope'],
  subject: string,
  limits: LimitConfig[],
  fileLabel: string,
  path: string,
): RuleEntry {
  return { scope, subject, limits, origin: `${fileLabel} ${path}`, indexLimits: true };
}

// ---- cross references -----------------------------------------------------------------------

function checkReferences(
  config: GatewayConfig,
  entries: readonly RuleEntry[],
  errors: string[],
  warnings: string[],
  at: (path: readonly PropertyKey[], key?: boolean) => string,
): void {
  /** A key path with its place in the file; `key` points at the key itself (map keys naming models). */
  const placed = (path: readonly PropertyKey[], key = false): string => `${at(path, key)}${formatPath(path)}`;
  const configured = Object.keys(config.providers);
  // With no provider configured the gateway serves the built-in mock instance, so a first run works offline.
  const names = configured.length > 0 ? configured : [BUILT_IN_MOCK_PROVIDER];
  const known = names.join(', ');

  /** Checks a `provider/model` reference; bare models and alias names are resolved at run time. */
  const checkModelRef = (model: string, where: string): void => {
    const slash = model.indexOf('/');
    if (slash === -1) return;
    const provider = model.slice(0, slash);
    const modelId = model.slice(slash + 1);
    if (!names.includes(provider)) {
      errors.push(`${where}: unknown provider "${provider}" in "${model}" (configured: ${known})`);
      return;
    }
    const listed = config.providers[provider]?.models;
    if (listed !== undefined && !listed.includes(modelId)) {
      warnings.push(`${where}: provider "${provider}" does not list model "${modelId}" in its models`);
    }
  };

  for (const key of Object.keys(config.pricing)) checkModelRef(key, placed(['pricing', key], true));
  for (const [alias, def] of Object.entries(config.aliases)) {
    def.targets.forEach((t, i) => checkModelRef(t.model, placed(['aliases', alias, 'targets', i])));
  }
  for (const [model, candidates] of Object.entries(config.failover)) {
    checkModelRef(model, placed(['failover', model], true));
    candidates.forEach((c, i) => {
      const where = placed(['failover', model, i]);
      if (c === model) errors.push(`${where}: "${c}" cannot be a failover candidate for itself`);
      else checkModelRef(c, where);
    });
  }

  // Rules naming providers that do not exist are not fatal (the provider may be added later) but
  // almost always a typo, so they are reported.
  const lower = new Set(names.map((n) => n.toLowerCase()));
  for (const entry of entries) {
    if (entry.scope === 'provider' && !lower.has(entry.subject.toLowerCase())) {
      warnings.push(`${entry.origin}: rate limit for provider "${entry.subject}", which is not configured (configured: ${known})`);
    }
    const slash = entry.subject.indexOf('/');
    if (entry.scope === 'model' && slash !== -1 && !lower.has(entry.subject.slice(0, slash).toLowerCase())) {
      warnings.push(`${entry.origin}: rate limit for model "${entry.subject}", whose provider is not configured (configured: ${known})`);
    }
  }
}
