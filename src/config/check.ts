/**
 * `floodgate check-config FILE`: validates without starting anything, finding what start-up would
 * refuse. Prints every error, one a line (`<file>:<line>:<column>: <key path>: <message>` where
 * the file has the key), then the warnings; or a short summary of what the file declares, so an
 * operator can eyeball it, with the warnings.
 */
import { ConfigError } from './errors.ts';
import { loadConfig } from './load.ts';
import { periodLabel } from '../ratelimit/normalize.ts';
import { formatUsd } from '../shared/money.ts';

export interface CheckResult {
  ok: boolean;
  lines: string[];
}

export function checkConfigFile(file: string, env: NodeJS.ProcessEnv, cwd?: string): CheckResult {
  let loaded;
  try {
    loaded = loadConfig({ file, env, cwd });
  } catch (err) {
    if (err instanceof ConfigError) {
      const counts = [plural(err.errors.length, 'error'), ...(err.warnings.length > 0 ? [plural(err.warnings.length, 'warning')] : [])];
      return { ok: false, lines: [`${file}: ${counts.join(', ')}`, ...err.errors, ...err.warnings.map((w) => `warning: ${w}`)] };
    }
    throw err;
  }
  const { config, rateLimitSeeds, budgetSeeds, warnings } = loaded;
  const lines = [`${file}: OK`];

  const providers = Object.entries(config.providers);
  lines.push(
    providers.length === 0
      ? '  providers: none (the built-in mock provider will be served)'
      : `  providers: ${providers
          .map(([name, p]) => `${name} (${p.type}${p.models ? `, ${p.models.length} model${p.models.length === 1 ? '' : 's'}` : ''})`)
          .join(', ')}`,
  );
  const aliases = Object.entries(config.aliases);
  lines.push(`  aliases: ${aliases.length === 0 ? 'none' : aliases.map(([name, a]) => `${name} (${a.strategy}, ${a.targets.length} target${a.targets.length === 1 ? '' : 's'})`).join(', ')}`);
  const failover = Object.keys(config.failover).length;
  if (failover > 0) lines.push(`  failover: ${failover} model${failover === 1 ? '' : 's'}`);

  const count = (scope: string): number => rateLimitSeeds.filter((s) => s.scope === scope).length;
  lines.push(
    `  rate limits: ${config.rate_limits.enabled ? 'enabled' : 'disabled'}; ${count('user_path')} user-path, ${count('provider')} provider, ${count('model')} model rule(s)${config.rate_limits.reservations.enabled ? `; token reservations on (${config.rate_limits.reservations.default_completion_tokens} completion tokens by default)` : ''}`,
  );
  for (const s of rateLimitSeeds) {
    const caps = [s.maxRequests !== undefined ? `${s.maxRequests} requests` : '', s.maxTokens !== undefined ? `${s.maxTokens} tokens` : '']
      .filter((c) => c !== '')
      .join(', ');
    lines.push(`    ${s.scope} ${s.subject} ${periodLabel(s.periodSeconds)}: ${caps}${s.perChild ? ' per child' : ''}  [${s.origin}]`);
  }
  lines.push(`  budgets: ${config.budgets.enabled ? 'enabled' : 'disabled'}; ${budgetSeeds.length} budget(s)${config.budgets.reservations.enabled ? '; dollar reservations on' : ''}`);
  for (const b of budgetSeeds) lines.push(`    ${b.userPath} ${b.period}: ${formatUsd(b.maxUsd)}  [${b.origin}]`);
  const prices = Object.keys(config.pricing).length;
  if (prices > 0) lines.push(`  pricing: ${prices} model price override(s)`);
  lines.push(`  storage: ${config.storage.type}; usage tracking ${config.usage.enabled ? 'on' : 'off'}`);
  for (const w of warnings) lines.push(`  warning: ${w}`);
  return { ok: true, lines };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
