import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { calcPrice, findProvider } from '@pydantic/genai-prices';
import { MAX_REMEMBERED_MODELS, MAX_UNKNOWN_WARNINGS, PriceTable, type PricedUsage } from '../../src/pricing/price-table.ts';
import { pricesProviderOf } from '../../src/providers/registry.ts';

const AT = Date.parse('2025-06-01T12:00:00Z');

/** The package's own per-million-token prices of a model, as its data states them. */
function published(model: string, providerId: string): { input: number; output: number; cacheRead: number } {
  const found = calcPrice({ input_tokens: 1 }, model, { providerId, timestamp: new Date(AT) });
  assert.ok(found, `the package prices ${providerId}/${model}`);
  const { input_mtok: input, output_mtok: output, cache_read_mtok: cacheRead } = found.model_price;
  assert.equal(typeof input, 'number', `${model} input_mtok is a flat price`);
  assert.ok(output === undefined || typeof output === 'number', `${model} output_mtok is a flat price or absent`);
  return { input: input as number, output: (output ?? 0) as number, cacheRead: (cacheRead ?? input) as number };
}

/** Dollars for the tokens at per-million prices: uncached prompt, cached prompt and completion. */
function expected(p: { input: number; output: number; cacheRead: number }, prompt: number, cached: number, completion: number): number {
  return ((prompt - cached) * p.input + cached * p.cacheRead + completion * p.output) / 1_000_000;
}

/** Exact to a millionth of a micro-dollar: only the order of float operations may differ. */
const exact = (usd: number): number => Math.round(usd * 1e12);

const usage = (provider: string, model: string, promptTokens: number, completionTokens: number, cachedPromptTokens = 0): PricedUsage => ({
  provider, model, promptTokens, completionTokens, cachedPromptTokens, timestampMs: AT,
});

function table(overrides = {}) {
  const unknown: string[] = [];
  const prices = new PriceTable({
    instances: [
      { name: 'oai', pricesProvider: pricesProviderOf('openai'), baseUrl: 'https://api.openai.com/v1' },
      { name: 'local', pricesProvider: pricesProviderOf('openai'), baseUrl: 'http://127.0.0.1:8000/v1' },
      { name: 'groq', pricesProvider: pricesProviderOf('openai'), baseUrl: 'https://api.groq.com/openai/v1' },
      { name: 'claude', pricesProvider: pricesProviderOf('anthropic'), baseUrl: 'https://api.anthropic.com' },
      // A mock pointed at a real provider's address still has no prices.
      { name: 'mock', pricesProvider: pricesProviderOf('mock'), baseUrl: 'https://api.openai.com/v1' },
      { name: 'untyped', pricesProvider: undefined },
    ],
    overrides,
    onUnknown: (provider, model) => unknown.push(`${provider}/${model}`),
  });
  return { prices, unknown };
}

describe('PriceTable', () => {
  it('prices real models from the package data: prompt, cached prompt and completion tokens', () => {
    const { prices, unknown } = table();
    const mini = published('gpt-4o-mini', 'openai');
    assert.ok(mini.cacheRead < mini.input, 'gpt-4o-mini has a cheaper cached-input price');
    assert.equal(exact(prices.cost(usage('oai', 'gpt-4o-mini', 12_000, 800, 4_096))), exact(expected(mini, 12_000, 4_096, 800)));
    // An OpenAI-compatible instance at another address still gets OpenAI's prices by model id.
    assert.equal(exact(prices.cost(usage('local', 'gpt-4o-mini', 1_000, 100))), exact(expected(mini, 1_000, 0, 100)));
    const gpt4o = published('gpt-4o', 'openai');
    assert.equal(exact(prices.cost(usage('oai', 'gpt-4o', 2_500, 400, 1_024))), exact(expected(gpt4o, 2_500, 1_024, 400)));
    const embedding = published('text-embedding-3-small', 'openai');
    assert.equal(exact(prices.cost(usage('oai', 'text-embedding-3-small', 50_000, 0))), exact(expected(embedding, 50_000, 0, 0)));
    const sonnet = published('claude-sonnet-4-20250514', 'anthropic');
    assert.equal(exact(prices.cost(usage('claude', 'claude-sonnet-4-20250514', 3_000, 1_500, 2_000))), exact(expected(sonnet, 3_000, 2_000, 1_500)));
    assert.ok(prices.cost(usage('claude', 'claude-sonnet-4-20250514', 3_000, 1_500)) > 0);
    assert.deepEqual(unknown, []);
  });

  it('agrees with the package\'s own calcPrice for every model of the OpenAI, Anthropic and Groq tables', () => {
    const { prices } = table();
    let compared = 0;
    for (const [instance, providerId] of [['oai', 'openai'], ['claude', 'anthropic'], ['groq', 'groq']] as const) {
      for (const model of findProvider({ providerId })!.models) {
        const direct = (prompt: number, cached: number, completion: number): number | undefined => {
          try {
            return calcPrice({ input_tokens: prompt, cache_read_tokens: cached, output_tokens: completion }, model.id, { providerId, timestamp: new Date(AT) })?.total_price;
          } catch {
            return undefined; // usage the package cannot price for this model (the table answers 0 then)
          }
        };
        for (const [prompt, cached, completion] of [[1_000, 0, 0], [12_345, 4_096, 678], [250_000, 0, 9_000]] as const) {
          const expectedCost = direct(prompt, cached, completion);
          if (expectedCost === undefined) continue;
          assert.equal(exact(prices.cost(usage(instance, model.id, prompt, completion, cached))), exact(expectedCost), `${providerId}/${model.id} ${prompt}/${cached}/${completion}`);
          compared++;
        }
      }
    }
    assert.ok(compared > 100, `compared ${compared} prices`);
  });

  it('uses the provider the base URL points at, and falls back to the model id alone', () => {
    const { prices, unknown } = table();
    const llama = published('llama-3.1-8b-instant', 'groq');
    assert.equal(exact(prices.cost(usage('groq', 'llama-3.1-8b-instant', 10_000, 2_000))), exact(expected(llama, 10_000, 0, 2_000)));
    // A Claude model behind an OpenAI-compatible instance: found by its id.
    const haiku = published('claude-3-5-haiku-20241022', 'anthropic');
    assert.equal(exact(prices.cost(usage('local', 'claude-3-5-haiku-20241022', 1_000, 1_000))), exact(expected(haiku, 1_000, 0, 1_000)));
    // A type that names no prices provider: by model id alone.
    assert.equal(exact(prices.cost(usage('untyped', 'gpt-4o-mini', 1_000, 100))), exact(expected(published('gpt-4o-mini', 'openai'), 1_000, 0, 100)));
    assert.deepEqual(unknown, []);
  });

  it('an override wins over the package; without a cached price, cached tokens cost the input price', () => {
    const { prices } = table({
      'oai/gpt-4o-mini': { inputPerMtok: 2, outputPerMtok: 8, cachedInputPerMtok: 0.5 },
      'mock/mock-1': { inputPerMtok: 1000, outputPerMtok: 3000 },
    });
    // (600 × 2 + 400 × 0.5 + 100 × 8) / 1e6
    assert.equal(exact(prices.cost(usage('oai', 'gpt-4o-mini', 1_000, 100, 400))), exact(0.0022));
    // (1000 × 1000 + 10 × 3000) / 1e6, the cached tokens included in the prompt at its price
    assert.equal(exact(prices.cost(usage('mock', 'mock-1', 1_000, 10, 500))), exact(1.03));
    // Other models of the same instance keep the package's prices.
    const gpt4o = published('gpt-4o', 'openai');
    assert.equal(exact(prices.cost(usage('oai', 'gpt-4o', 100, 100))), exact(expected(gpt4o, 100, 0, 100)));
  });

  it('an unknown model costs 0 and is reported once; the mock type, cache hits and empty usage cost 0 silently', () => {
    const { prices, unknown } = table();
    assert.equal(prices.cost(usage('oai', 'no-such-model-xyz', 1_000, 1_000)), 0);
    assert.equal(prices.cost(usage('oai', 'no-such-model-xyz', 5, 5)), 0);
    assert.equal(prices.cost(usage('mock', 'mock-1', 1_000, 1_000)), 0);
    assert.equal(prices.cost(usage('mock', 'gpt-4o', 1_000, 1_000)), 0);
    assert.equal(prices.cost(usage('', 'gpt-4o', 0, 0)), 0);
    assert.equal(prices.cost(usage('oai', 'gpt-4o', 0, 0)), 0);
    assert.equal(prices.cost(usage('oai', '', 10, 10)), 0);
    assert.deepEqual(unknown, ['oai/no-such-model-xyz']);
  });

  it('never prices more cached tokens than prompt tokens', () => {
    const { prices } = table({ 'oai/m': { inputPerMtok: 1, outputPerMtok: 1, cachedInputPerMtok: 0 } });
    assert.equal(prices.cost(usage('oai', 'm', 100, 0, 5_000)), 0);
  });

  it('remembers a bounded number of models and reports a bounded number without a price, however many a passthrough names', () => {
    const unknown: string[] = [];
    const limits: number[] = [];
    const prices = new PriceTable({
      instances: [{ name: 'oai', pricesProvider: pricesProviderOf('openai'), baseUrl: 'http://127.0.0.1:8000/v1' }],
      overrides: { 'oai/priced': { inputPerMtok: 1_000_000, outputPerMtok: 0 } },
      onUnknown: (provider, model) => unknown.push(`${provider}/${model}`),
      onUnknownLimit: (limit) => limits.push(limit),
    });
    for (let i = 0; i < MAX_REMEMBERED_MODELS + 500; i++) assert.equal(prices.cost(usage('oai', `made-up-${i}`, 10, 10)), 0);
    assert.equal(prices.size, MAX_REMEMBERED_MODELS);
    assert.equal(unknown.length, MAX_UNKNOWN_WARNINGS);
    assert.deepEqual(unknown.slice(0, 2), ['oai/made-up-0', 'oai/made-up-1']);
    assert.deepEqual(limits, [MAX_UNKNOWN_WARNINGS]);
    // A priced model forgotten under that pressure is looked up again, at the same price.
    assert.equal(prices.cost(usage('oai', 'priced', 1, 0)), 1);
    for (let i = 0; i < MAX_REMEMBERED_MODELS; i++) prices.cost(usage('oai', `other-${i}`, 10, 10));
    assert.equal(prices.cost(usage('oai', 'priced', 2, 0)), 2);
    assert.equal(prices.size, MAX_REMEMBERED_MODELS);
  });
});
