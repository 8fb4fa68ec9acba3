import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseBudgetEnv } from '../../src/config/env.ts';
import { BUDGETS_WITHOUT_USAGE_WARNING } from '../../src/config/load.ts';
import { assertErrors, errorsOf, load } from './helpers.ts';

describe('config: budgets', () => {
  it('seeds YAML budgets with their origins; a one-day period_seconds is the day period', () => {
    const { config, budgetSeeds } = load(`
budgets:
  refresh_seconds: 2
  user_paths:
    - { path: Team//, limits: [ { period: month, max_usd: 200 }, { period: week, max_usd: "50.5" }, { period_seconds: 3600, max_usd: 0.01 } ] }
    - { path: /, limits: [ { period_seconds: 86400, max_usd: 1000 } ] }
`);
    assert.equal(config.budgets.refresh_seconds, 2);
    assert.equal(config.budgets.enabled, true);
    assert.deepEqual(budgetSeeds, [
      { userPath: '/Team', period: 'month', maxUsd: 200, origin: 'floodgate.yaml budgets.user_paths[0].limits[0]' },
      { userPath: '/Team', period: 'week', maxUsd: 50.5, origin: 'floodgate.yaml budgets.user_paths[0].limits[1]' },
      { userPath: '/Team', period: '3600s', maxUsd: 0.01, origin: 'floodgate.yaml budgets.user_paths[0].limits[2]' },
      { userPath: '/', period: 'day', maxUsd: 1000, origin: 'floodgate.yaml budgets.user_paths[1].limits[0]' },
    ]);
  });

  it('rejects malformed budgets, naming the key', () => {
    assertErrors(
      `
budgets:
  refresh_seconds: 0
  bogus: 1
  user_paths:
    - { path: /a, limits: [ { period: year, max_usd: 1 } ] }
    - { path: /b, limits: [ { period: day, max_usd: 0 }, { period: week, max_usd: -1 }, { period: month } ] }
    - { path: /c, limits: [ { period: day, period_seconds: 60, max_usd: 1 }, { max_usd: 1 }, { period: day, max_usd: abc } ] }
    - { path: /d/.., limits: [] }
    - { path: /e, limits: [ { period_seconds: 31622401, max_usd: 1 }, { period: day, max_usd: 1, max_tokens: 5 } ] }
`,
      [
        'budgets.refresh_seconds: must be an integer 1..3600',
        'budgets.bogus: unknown key',
        'budgets.user_paths[0].limits[0].period: must be one of day, week, month (use period_seconds for a custom window)',
        'budgets.user_paths[1].limits[0].max_usd: must be a number of US dollars greater than 0 and at most 1000000000000',
        'budgets.user_paths[1].limits[1].max_usd: must be a number of US dollars greater than 0 and at most 1000000000000',
        'budgets.user_paths[1].limits[2].max_usd: required',
        'budgets.user_paths[2].limits[0]: set either period or period_seconds, not both',
        'budgets.user_paths[2].limits[1]: period or period_seconds is required',
        'budgets.user_paths[2].limits[2].max_usd: must be a number of US dollars greater than 0 and at most 1000000000000',
        `budgets.user_paths[3].path: "/d/.." must not contain '.' or '..' segments`,
        'budgets.user_paths[4].limits[0].period_seconds: must be an integer 1..31622400',
        'budgets.user_paths[4].limits[1].max_tokens: unknown key',
      ],
    );
  });

  it('reports a budget declared twice with both places', () => {
    assert.deepEqual(
      errorsOf(`
budgets:
  user_paths:
    - { path: /team, limits: [ { period: day, max_usd: 1 } ] }
    - { path: /TEAM, limits: [ { period_seconds: 86400, max_usd: 2 } ] }
`),
      ['duplicate day budget for /TEAM: declared in floodgate.yaml budgets.user_paths[0].limits[0] and in floodgate.yaml budgets.user_paths[1].limits[0]'],
    );
  });

  it('SET_BUDGET_* declares budgets (compact or JSON) and replaces the YAML entry for the same path', () => {
    const { config, budgetSeeds } = load(
      `
budgets:
  user_paths:
    - { path: /team/alice, limits: [ { period: day, max_usd: 1 } ] }
    - { path: /other, limits: [ { period: day, max_usd: 3 } ] }
`,
      {
        SET_BUDGET_: 'month=1000',
        SET_BUDGET_TEAM__ALICE: 'day=10, week=50.25,month=200',
        SET_BUDGET_ML_TEAM: '[{"period_seconds":3600,"max_usd":0.5},{"period":"week","max_usd":"7"}]',
      },
    );
    assert.deepEqual(budgetSeeds, [
      { userPath: '/other', period: 'day', maxUsd: 3, origin: 'floodgate.yaml budgets.user_paths[1].limits[0]' },
      { userPath: '/', period: 'month', maxUsd: 1000, origin: 'env SET_BUDGET_' },
      { userPath: '/ml_team', period: '3600s', maxUsd: 0.5, origin: 'env SET_BUDGET_ML_TEAM' },
      { userPath: '/ml_team', period: 'week', maxUsd: 7, origin: 'env SET_BUDGET_ML_TEAM' },
      { userPath: '/team/alice', period: 'day', maxUsd: 10, origin: 'env SET_BUDGET_TEAM__ALICE' },
      { userPath: '/team/alice', period: 'week', maxUsd: 50.25, origin: 'env SET_BUDGET_TEAM__ALICE' },
      { userPath: '/team/alice', period: 'month', maxUsd: 200, origin: 'env SET_BUDGET_TEAM__ALICE' },
    ]);
    // The resolved config shows the effective budgets.
    assert.deepEqual(config.budgets.user_paths.map((u) => u.path), ['/other', '/', '/ml_team', '/team/alice']);
  });

  it('malformed SET_BUDGET_* values name the variable', () => {
    const r = parseBudgetEnv({
      SET_BUDGET_A: 'day=10,hour=1',
      SET_BUDGET_B: 'day=ten,week=0',
      SET_BUDGET_C: 'day=1,day=2',
      SET_BUDGET_D: 'day',
      SET_BUDGET_E: '',
      SET_BUDGET_F: '[{"period":"day"}]',
      SET_BUDGET_G: '{"period":"day","max_usd":1}',
      SET_BUDGET_H: '[oops',
      'SET_BUDGET_X__..': 'day=1',
      SET_BUDGET_OK: 'day=1',
    });
    assert.deepEqual(r.userPaths, [{ variable: 'SET_BUDGET_OK', userPath: '/ok', limits: [{ period: 'day', max_usd: 1 }] }]);
    assert.deepEqual(r.errors, [
      'SET_BUDGET_A: unknown budget period "hour" (expected day, week, month; use a JSON array for period_seconds)',
      'SET_BUDGET_B: day must be a number of US dollars greater than 0 and at most 1000000000000, got "ten"',
      'SET_BUDGET_B: week must be a number of US dollars greater than 0 and at most 1000000000000, got "0"',
      'SET_BUDGET_C: duplicate budget period "day"',
      'SET_BUDGET_D: malformed item "day" (expected name=dollars separated by commas, e.g. day=10,month=200)',
      'SET_BUDGET_E: empty value (expected e.g. day=10,month=200 or a JSON array of budget limits)',
      'SET_BUDGET_F[0].max_usd: required',
      'SET_BUDGET_G: expected a JSON array of limits, e.g. [{"period_seconds":3600,"max_usd":5}]',
      `SET_BUDGET_H: invalid JSON: ${jsonError('[oops')}`,
      `SET_BUDGET_X__..: user path "x/.." must not contain '.' or '..' segments`,
    ]);
  });

  it('BUDGETS_ENABLED and BUDGETS_REFRESH_SECONDS override the file', () => {
    const { config } = load('budgets: { enabled: true, refresh_seconds: 5 }', { BUDGETS_ENABLED: 'off', BUDGETS_REFRESH_SECONDS: '1' });
    assert.equal(config.budgets.enabled, false);
    assert.equal(config.budgets.refresh_seconds, 1);
    assert.deepEqual(errorsOf('', { BUDGETS_ENABLED: 'maybe' }), ['BUDGETS_ENABLED: must be a boolean (true/false, 1/0, yes/no, on/off), got "maybe"']);
    assert.deepEqual(errorsOf('', { BUDGETS_REFRESH_SECONDS: '0.5' }), ['BUDGETS_REFRESH_SECONDS: budgets.refresh_seconds: must be an integer 1..3600']);
  });

  it('warns when budgets are declared while usage tracking is off', () => {
    assert.ok(load('budgets: { user_paths: [ { path: /a, limits: [ { period: day, max_usd: 1 } ] } ] }', { USAGE_ENABLED: 'false' }).warnings.includes(BUDGETS_WITHOUT_USAGE_WARNING));
    assert.deepEqual(load('', { USAGE_ENABLED: 'false' }).warnings, []);
  });
});

describe('config: pricing', () => {
  it('takes per-model prices by provider/model; the cached price is optional', () => {
    const { config } = load(`
providers: { up: { type: openai, base_url: "http://127.0.0.1:1/v1" } }
pricing:
  up/gpt-x: { input_per_mtok: 1.5, output_per_mtok: "6", cached_input_per_mtok: 0.75 }
  up/free: { input_per_mtok: 0, output_per_mtok: 0 }
`);
    assert.deepEqual(config.pricing, {
      'up/gpt-x': { input_per_mtok: 1.5, output_per_mtok: 6, cached_input_per_mtok: 0.75 },
      'up/free': { input_per_mtok: 0, output_per_mtok: 0 },
    });
  });

  it('rejects malformed prices and unknown providers, naming the key', () => {
    assertErrors(
      `
providers: { up: { type: openai, base_url: "http://127.0.0.1:1/v1", models: [gpt-x] } }
pricing:
  gpt-x: { input_per_mtok: 1, output_per_mtok: 1 }
  up/a: { input_per_mtok: -1, output_per_mtok: 1 }
  up/b: { input_per_mtok: 1 }
  up/c: { input_per_mtok: 1, output_per_mtok: 1, cache_per_mtok: 1 }
  up/d: 5
  nope/gpt-x: { input_per_mtok: 1, output_per_mtok: 1 }
`,
      [
        'pricing.gpt-x: "gpt-x" must be "<provider>/<model>"',
        'pricing.up/a.input_per_mtok: must be a number of US dollars per million tokens, from 0 to 10000000',
        'pricing.up/b.output_per_mtok: must be a number of US dollars per million tokens, from 0 to 10000000',
        'pricing.up/c.cache_per_mtok: unknown key',
        'pricing.up/d: expected a mapping such as { input_per_mtok: 0.15, output_per_mtok: 0.6 }',
      ],
    );
    assert.deepEqual(
      errorsOf(`
providers: { up: { type: openai, base_url: "http://127.0.0.1:1/v1" } }
pricing:
  nope/gpt-x: { input_per_mtok: 1, output_per_mtok: 1 }
`),
      ['pricing.nope/gpt-x: unknown provider "nope" in "nope/gpt-x" (configured: up)'],
    );
  });
});

function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return (err as Error).message;
  }
  return '';
}
