import { AnthropicProvider } from './anthropic.ts';
import { MockProvider } from './mock.ts';
import { OpenAIProvider } from './openai.ts';
import type { Provider } from './types.ts';

/** A `providers.<name>` entry of the config (structurally; the config module validates it). */
export interface ProviderConfig {
  type: 'openai' | 'anthropic' | 'mock';
  base_url?: string;
  api_key?: string;
  models?: string[];
  connect_timeout_ms?: number;
  timeout_ms?: number;
}

export function createProvider(name: string, config: ProviderConfig): Provider {
  const common = {
    name,
    baseUrl: config.base_url,
    apiKey: config.api_key,
    models: config.models,
    connectTimeoutMs: config.connect_timeout_ms,
    timeoutMs: config.timeout_ms,
  };
  switch (config.type) {
    case 'openai': return new OpenAIProvider(common);
    case 'anthropic': return new AnthropicProvider(common);
    case 'mock': return new MockProvider({ name, models: config.models });
    default: throw new Error(`providers.${name}.type: unknown provider type ${JSON.stringify((config as { type: unknown }).type)}`);
  }
}

/** Instances in config order (the order decides which provider serves a bare model name). */
export function createProviders(map: Record<string, ProviderConfig>): Provider[] {
  return Object.entries(map).map(([name, cfg]) => createProvider(name, cfg));
}

export async function closeProviders(providers: Iterable<Provider>): Promise<void> {
  await Promise.allSettled([...providers].map((p) => p.close()));
}
